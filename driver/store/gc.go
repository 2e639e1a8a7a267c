package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// GC keeps the key's last Retain generations, deletes its older manifests,
// then deletes every chunk that no manifest of any key references, the temp
// files of crashed commits and the chunks Restore quarantined in .corrupt/.
//
// The chunk sweep holds the store-wide lock exclusively, so it waits for
// commits and restores in flight (which hold it shared) and none start
// during it: a chunk a commit found already present, and therefore did not
// write, cannot be deleted before that commit's manifest references it.
// If any manifest cannot be read, nothing is deleted.
func (s *Store) GC(key Key) error {
	return s.eng.GC(key)
}

// gc is GC in a directory store.
func (s *dirEngine) GC(key Key) error {
	ctx := context.Background()
	keyDir, err := key.dir(s.root)
	if err != nil {
		return err
	}
	if err := s.statRoot(); err != nil {
		return err
	}
	if err := func() error {
		unlock, err := lockKey(ctx, keyDir)
		if err != nil {
			return err
		}
		defer unlock()
		gens, err := listGenerations(keyDir)
		if err != nil {
			return err
		}
		return s.prune(keyDir, gens)
	}(); err != nil {
		return s.classify(err)
	}
	return s.classify(s.sweep(ctx))
}

// prune deletes the manifests of gens (ascending) beyond the newest Retain,
// and stale manifest temp files. The caller holds the key lock.
func (s *Store) prune(keyDir string, gens []uint64) error {
	var errs []error
	if len(gens) > s.retain {
		for _, g := range gens[:len(gens)-s.retain] {
			if err := os.Remove(filepath.Join(keyDir, ManifestName(g))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	ents, err := os.ReadDir(keyDir)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			if err := os.Remove(filepath.Join(keyDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := syncDir(keyDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// sweep deletes unreferenced chunks and crashed commits' temp files.
func (s *Store) sweep(ctx context.Context) error {
	unlock, err := s.lockStore(ctx, true)
	if err != nil {
		return err
	}
	defer unlock()

	referenced, err := s.referencedChunks()
	if err != nil {
		return fmt.Errorf("gc: not deleting anything: %w", err)
	}
	Hook(StepGCSweeping)
	var (
		deleted int
		bytes   int64
		errs    []error
	)
	fanout, err := os.ReadDir(s.chunksDir())
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	for _, fd := range fanout {
		dir := filepath.Join(s.chunksDir(), fd.Name())
		ents, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			if !isDigest(e.Name()) || referenced[e.Name()] {
				continue
			}
			if info, err := e.Info(); err == nil {
				bytes += info.Size()
			}
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			deleted++
		}
	}
	// No commit is in flight anywhere (we hold the store lock exclusively),
	// so every temp file belongs to a crashed one.
	tmps, err := os.ReadDir(s.tmpDir())
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range tmps {
		if err := os.RemoveAll(filepath.Join(s.tmpDir(), e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	// Quarantined chunks were moved aside by Restore for inspection; no
	// manifest can use them.
	quarantined, _ := os.ReadDir(filepath.Join(s.root, ".corrupt"))
	for _, e := range quarantined {
		if err := os.Remove(filepath.Join(s.root, ".corrupt", e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.logger.Info("garbage collected", "chunks_deleted", deleted, "bytes_freed", bytes,
		"chunks_kept", len(referenced), "temp_files_deleted", len(tmps), "quarantined_deleted", len(quarantined))
	if len(errs) > 0 {
		return fmt.Errorf("gc: %w", errors.Join(errs...))
	}
	return nil
}

// referencedChunks reads every manifest of every key. Manifests that parse
// but are corrupt still protect the chunks they name; unparsable ones cannot
// be restored and are skipped with a warning; read errors abort.
func (s *Store) referencedChunks() (map[string]bool, error) {
	refs := map[string]bool{}
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			name := e.Name()
			if depth < 5 {
				// Escaped key parts never start with '.', the store's own
				// directories always do.
				if e.IsDir() && !strings.HasPrefix(name, ".") {
					if err := walk(filepath.Join(dir, name), depth+1); err != nil {
						return err
					}
				}
				continue
			}
			if !strings.HasPrefix(name, manifestPrefix) || !strings.HasSuffix(name, manifestSuffix) {
				continue
			}
			if err := addRefs(refs, filepath.Join(dir, name)); err != nil {
				if errors.Is(err, ErrCorrupt) {
					s.logger.Warn("gc: skipping unreadable manifest", "path", filepath.Join(dir, name), "error", err)
					continue
				}
				return err
			}
		}
		return nil
	}
	if err := walk(s.root, 0); err != nil {
		return nil, err
	}
	return refs, nil
}

// addRefs adds the chunks named by the manifest file at p to refs.
func addRefs(refs map[string]bool, p string) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	for _, f := range m.Files {
		for _, c := range f.Chunks {
			refs[c] = true
		}
	}
	return nil
}

// Sweep deletes every chunk no manifest of any key references (and crashed
// commits' temp files), as GC does after pruning; use it after Delete. It
// waits, until ctx is done, for commits and restores in flight.
func (s *Store) Sweep(ctx context.Context) error {
	return s.eng.Sweep(ctx)
}

// sweepAll is Sweep in a directory store.
func (s *dirEngine) Sweep(ctx context.Context) error {
	if err := s.statRoot(); err != nil {
		return err
	}
	return s.classify(s.sweep(ctx))
}

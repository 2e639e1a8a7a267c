package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Restore replaces the contents of dstDir with the newest generation of key
// whose every chunk verifies, falling back to older generations on
// corruption (listed in RestoreResult.FellBack). It returns ErrNoCheckpoint
// when the key has no checkpoint, and an error matching both ErrNoCheckpoint
// and ErrCorrupt when every generation failed verification. Only a bad
// generation (ErrCorrupt) is skipped: a failure to write the destination
// (ErrRestoreDest), a store read error or the end of ctx is returned at once,
// with dstDir untouched, because the generation itself is intact.
//
// Files are restored through a window of one open file per worker, so any
// number of files restores with a bounded number of descriptors.
//
// The generation is written and verified in a temp sibling of dstDir, then
// swapped with dstDir by an atomic exchange (Linux
// renameat2(RENAME_EXCHANGE); two renames elsewhere). A crash before the swap
// leaves dstDir untouched; the next Restore removes the leftovers.
//
// The restored tree is a working copy, not a second durable copy: it is
// written into the page cache and never fsynced (the store keeps the durable
// one, and the driver restores again on every task start, so a power loss
// that tears the working copy costs nothing). The task reads its checkpoint
// straight from memory after the restore. dstDir's
// parent must exist. Restored files and directories get the owner of the
// existing dstDir when the process may chown. Callers serialise restores into
// the same dstDir.
func (s *Store) Restore(ctx context.Context, key Key, dstDir string) (*RestoreResult, error) {
	dst, err := filepath.Abs(dstDir)
	if err != nil {
		return nil, fmt.Errorf("restore destination: %w", err)
	}
	if fi, err := os.Stat(filepath.Dir(dst)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: parent of restore destination %s is not a directory", ErrInvalid, dst)
	}
	parent, err := os.OpenRoot(filepath.Dir(dst))
	if err != nil {
		return nil, fmt.Errorf("%w: parent of restore destination %s: %w", ErrInvalid, dst, err)
	}
	defer parent.Close()
	return s.RestoreRoot(ctx, key, parent, filepath.Base(dst))
}

// RestoreRoot is Restore into the entry base of the directory parent. Every
// step goes through parent (os.Root) and never follows base itself: a
// destination a task replaced with a symlink is swapped out like a
// directory, and nothing is written, chowned or removed outside parent.
func (s *Store) RestoreRoot(ctx context.Context, key Key, parent *os.Root, base string) (*RestoreResult, error) {
	res, err := s.restoreRoot(ctx, key, parent, base)
	if errors.Is(err, ErrRestoreDest) {
		err = explainNoSpace(err, parent.Name())
	}
	return res, err
}

func (s *Store) restoreRoot(ctx context.Context, key Key, parent *os.Root, base string) (*RestoreResult, error) {
	start := s.now()
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if err := s.statRoot(); err != nil {
		return nil, err
	}
	if base == "" || base == "." || base == ".." || strings.ContainsRune(base, '/') {
		return nil, fmt.Errorf("%w: restore destination name %q", ErrInvalid, base)
	}
	return s.eng.Restore(ctx, key, parent, base, start)
}

// restore is Restore from a directory store: under the store's shared lock,
// the newest generation that verifies.
func (s *dirEngine) Restore(ctx context.Context, key Key, parent *os.Root, base string, start time.Time) (*RestoreResult, error) {
	keyDir, err := key.dir(s.root)
	if err != nil {
		return nil, err
	}
	owner := DirOwner(parent, base)

	unlock, err := s.lockStore(ctx, false)
	if err != nil {
		return nil, s.classify(err)
	}
	defer unlock()

	gens, err := listGenerations(keyDir)
	if err != nil {
		return nil, s.classify(err)
	}
	if len(gens) == 0 {
		return nil, fmt.Errorf("%w for %s", ErrNoCheckpoint, key)
	}
	RemoveStale(parent, base)

	res := &RestoreResult{}
	var lastErr error
	for _, gen := range slices.Backward(gens) {
		m, err := readManifest(keyDir, gen)
		if err == nil {
			err = s.RestoreGeneration(ctx, m, parent, base, owner)
		}
		if err == nil {
			res.Manifest = m
			res.Duration = s.now().Sub(start)
			s.logger.Info("checkpoint restored", "key", m.Key, "generation", gen, "from_node", m.Node,
				"bytes", m.TotalBytes, "fell_back", res.FellBack, "duration", res.Duration)
			return res, nil
		}
		if errors.Is(err, fs.ErrNotExist) && m == nil {
			continue // pruned by a concurrent commit
		}
		if !errors.Is(err, ErrCorrupt) {
			return nil, s.classify(err)
		}
		s.logger.Warn("checkpoint generation failed verification, falling back", "key", key.String(),
			"generation", gen, "error", err)
		res.FellBack = append(res.FellBack, gen)
		lastErr = err
	}
	return nil, fmt.Errorf("%w for %s: all %d generations failed verification, newest error: %w",
		ErrNoCheckpoint, key, len(gens), lastErr)
}

// RestoreGeneration materialises m in a temp sibling of base and swaps it in.
func (s *Store) RestoreGeneration(ctx context.Context, m *Manifest, parent *os.Root, base string, owner *FileOwner) error {
	tmp := "." + base + ".restore-" + RandomSuffix()
	if err := parent.Mkdir(tmp, 0o700); err != nil {
		return destErr(tmp, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = parent.RemoveAll(tmp)
		}
	}()
	dir, err := parent.OpenRoot(tmp)
	if err != nil {
		return destErr(tmp, err)
	}
	defer dir.Close()
	if err := s.materialise(ctx, m, dir, owner); err != nil {
		return err
	}
	if fi, err := parent.Lstat(base); err == nil && fi.IsDir() {
		_ = dir.Chmod(".", fi.Mode().Perm())
	}
	owner.apply(dir, ".", false)
	Hook(StepRestoreStaged)
	if err := swapDir(parent, tmp, base); err != nil {
		return destErr(base, err)
	}
	committed = true
	Hook(StepRestoreSwapped)
	return nil
}

// materialise writes and verifies every file of m below root: directories
// first (parents precede children in a manifest), then files, symlinks last
// so nothing is ever written through one; then modes, owners and times,
// directories deepest first.
func (s *Store) materialise(ctx context.Context, m *Manifest, root *os.Root, owner *FileOwner) error {
	for i := range m.Files {
		e := &m.Files[i]
		if e.Mode.IsDir() {
			if err := root.Mkdir(filepath.FromSlash(e.Path), 0o700); err != nil {
				return destErr(e.Path, err)
			}
		}
	}
	if err := s.writeFiles(ctx, m, root, owner); err != nil {
		return err
	}
	for i := range m.Files {
		e := &m.Files[i]
		p := filepath.FromSlash(e.Path)
		switch {
		case e.Mode.IsRegular():
			if err := root.Chtimes(p, e.ModTime, e.ModTime); err != nil {
				return destErr(e.Path, err)
			}
		case e.Mode&fs.ModeSymlink != 0:
			if err := root.Symlink(filepath.FromSlash(e.Link), p); err != nil {
				return destErr(e.Path, err)
			}
			owner.apply(root, p, true)
		}
	}
	for i := len(m.Files) - 1; i >= 0; i-- {
		e := &m.Files[i]
		if !e.Mode.IsDir() {
			continue
		}
		p := filepath.FromSlash(e.Path)
		if err := root.Chmod(p, e.Mode.Perm()); err != nil {
			return destErr(e.Path, err)
		}
		owner.apply(root, p, false)
		if err := root.Chtimes(p, e.ModTime, e.ModTime); err != nil {
			return destErr(e.Path, err)
		}
	}
	return nil
}

// restoreFile is one regular file being restored, open while chunks of it
// are queued or in flight; the worker that finishes its last chunk closes it.
type restoreFile struct {
	e       *FileEntry
	f       *os.File
	pending atomic.Int64 // chunks not yet written
	release func()       // frees the file's slot in the open-file window
}

// writeFiles creates every regular file of m and writes its chunks with
// parallel workers. At most one file per worker is open at once (plus the
// chunk each worker reads): a checkpoint of any number of files restores
// with a bounded number of descriptors and bounded memory (one chunk buffer
// per worker).
func (s *Store) writeFiles(ctx context.Context, m *Manifest, root *os.Root, owner *FileOwner) error {
	type job struct {
		rf    *restoreFile
		index int
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Each restore worker waits on a synchronous read per chunk, so
	// restores run twice the workers of a commit (at most 16).
	workers := min(2*s.workers, max(s.workers, 16))
	slots := make(chan struct{}, workers)
	finish := func(rf *restoreFile) {
		defer rf.release()
		if err := rf.f.Chmod(rf.e.Mode.Perm()); err != nil {
			_ = rf.f.Close()
			cancel(destErr(rf.e.Path, err))
			return
		}
		owner.applyFile(rf.f)
		if err := rf.f.Close(); err != nil {
			cancel(destErr(rf.e.Path, err))
		}
	}
	done := func(rf *restoreFile, n int64) {
		if rf.pending.Add(-n) == 0 {
			finish(rf)
		}
	}
	jobs := make(chan job, workers*2)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for j := range jobs {
				if ctx.Err() == nil {
					if err := s.restoreChunkFrom(ctx, j.rf.f, j.rf.e, j.index, m.ChunkSize, &buf); err != nil {
						cancel(err)
					}
				}
				done(j.rf, 1)
			}
		}()
	}
	func() {
		defer close(jobs)
		for i := range m.Files {
			e := &m.Files[i]
			if !e.Mode.IsRegular() {
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			rf, err := createFile(root, e, func() { <-slots })
			if err != nil {
				cancel(err)
				return
			}
			n := len(e.Chunks)
			rf.pending.Store(int64(n) + 1) // +1: held while queueing
			for c := 0; c < n; c++ {
				select {
				case jobs <- job{rf, c}:
				case <-ctx.Done():
					done(rf, int64(n-c)+1)
					return
				}
			}
			done(rf, 1)
		}
	}()
	wg.Wait()
	return context.Cause(ctx)
}

// createFile creates the regular file e below root at its full size (a hole
// until chunks are written: restoreChunkFrom and WriteChunkAt rely on it),
// with release to call once it is closed. On error release has been called.
func createFile(root *os.Root, e *FileEntry, release func()) (*restoreFile, error) {
	f, err := root.OpenFile(filepath.FromSlash(e.Path), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		release()
		return nil, destErr(e.Path, err)
	}
	if err := f.Truncate(e.Size); err != nil {
		_ = f.Close()
		release()
		return nil, destErr(e.Path, err)
	}
	return &restoreFile{e: e, f: f, release: release}, nil
}

// destErr wraps a failure to write the restore destination (no space, too
// many open files, an I/O error of the local disk): ErrRestoreDest, never
// ErrCorrupt, so Restore does not fall back to an older generation for it.
func destErr(path string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrRestoreDest, path, err)
}

// restoreChunkFrom writes chunk index of e into f through the engine. A
// chunk whose digest is that of its length in zeros is neither read nor
// written: createFile sized the file, so those bytes already read as zeros
// (a hole), which is what the digest says they are.
func (s *Store) restoreChunkFrom(ctx context.Context, f *os.File, e *FileEntry, index, chunkSize int, buf *[]byte) error {
	off := int64(index) * int64(chunkSize)
	n := int(min(int64(chunkSize), e.Size-off))
	if e.Chunks[index] == ZeroDigest(n) {
		return nil
	}
	return s.eng.FetchChunk(ctx, f, e, index, chunkSize, off, n, buf)
}

// fetchChunk copies the chunk from its file below the root.
func (s *dirEngine) FetchChunk(_ context.Context, f *os.File, e *FileEntry, index, chunkSize int, _ int64, _ int, buf *[]byte) error {
	return s.restoreChunk(f, e, index, chunkSize, buf)
}

// restoreChunk verifies chunk index of e against its SHA-256 and writes it at
// its offset in f (buffered: into the page cache, where the task reads it).
// A missing chunk, one of the wrong size or one that mismatches is
// ErrCorrupt; a mis-sized or mismatching chunk is moved to .corrupt/ so the
// next commit writes it afresh. buf is the worker's buffer, allocated on
// first use.
func (s *Store) restoreChunk(f *os.File, e *FileEntry, index, chunkSize int, buf *[]byte) error {
	d := e.Chunks[index]
	off := int64(index) * int64(chunkSize)
	n := int(min(int64(chunkSize), e.Size-off))
	cf, err := os.Open(s.chunkPath(d))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s: chunk %s is missing", ErrCorrupt, e.Path, d)
	}
	if err != nil {
		return fmt.Errorf("open chunk: %w", err)
	}
	defer cf.Close()
	fi, err := cf.Stat()
	if err != nil {
		return fmt.Errorf("stat chunk: %w", err)
	}
	if fi.Size() != int64(n) {
		s.quarantine(d)
		return fmt.Errorf("%w: %s: chunk %s has %d bytes, want %d", ErrCorrupt, e.Path, d, fi.Size(), n)
	}
	if len(*buf) < chunkSize {
		*buf = make([]byte, chunkSize)
	}
	b := (*buf)[:n]
	if _, err := io.ReadFull(cf, b); err != nil {
		return fmt.Errorf("read chunk %s: %w", d, err)
	}
	// The chunk is not read again soon (the restored file holds the data
	// now): give its cached pages back, so the next chunk's read reuses them.
	dropCached(cf)
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != d {
		s.quarantine(d)
		return fmt.Errorf("%w: %s: chunk %s fails its SHA-256", ErrCorrupt, e.Path, d)
	}
	return WriteChunkAt(f, e.Path, b, off)
}

// WriteChunkAt writes chunk b at off in f, a file createFile sized (so
// reading as zeros where nothing was written): pieces that are all zeros
// are skipped, so holes stay holes.
func WriteChunkAt(f *os.File, path string, b []byte, off int64) error {
	for len(b) > 0 {
		// Moderate writes: on VMs that return freed memory to the host, one
		// large write(2) into the page cache was measured up to 2x slower
		// than the same bytes in 128 KiB writes (large folios).
		n := min(len(b), RestoreWriteSize)
		if isZero(b[:n]) {
			b, off = b[n:], off+int64(n)
			continue
		}
		if _, err := f.WriteAt(b[:n], off); err != nil {
			return destErr(path, err)
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// RestoreWriteSize is the largest write(2) Restore issues.
const RestoreWriteSize = 128 << 10

// quarantine moves a chunk that failed verification out of the chunk store.
func (s *Store) quarantine(d string) {
	qdir := filepath.Join(s.root, ".corrupt")
	if err := os.MkdirAll(qdir, dirPerm); err == nil {
		if err := os.Rename(s.chunkPath(d), filepath.Join(qdir, d)); err == nil {
			s.logger.Warn("quarantined corrupt chunk", "chunk", d, "path", filepath.Join(qdir, d))
		}
	}
}

// RemoveStale deletes the temp siblings left by restores that crashed.
func RemoveStale(parent *os.Root, base string) {
	d, err := parent.Open(".")
	if err != nil {
		return
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return
	}
	for _, n := range names {
		if strings.HasPrefix(n, "."+base+".restore-") || strings.HasPrefix(n, "."+base+".old-") {
			_ = parent.RemoveAll(n)
		}
	}
}

package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// Commit stores the contents of srcDir as the key's next generation and
// returns its manifest. Chunks already in the store are not written again.
//
// It is atomic and crash-safe: chunks are written to temp files, fsynced and
// renamed into place, their directories fsynced, and only then is the
// manifest written, fsynced and renamed into place (the commit point).
// Until that rename no reader sees the new generation; a crash at any point
// leaves the previous generations intact. Commits of one key are serialised
// by a lock file; commits of different keys run concurrently.
//
// After publishing, manifests beyond Options.Retain are deleted; unreferenced
// chunks are left for GC.
func (s *Store) Commit(ctx context.Context, key Key, srcDir string, node string, meta map[string]string) (*Manifest, CommitStats, error) {
	start := s.now()
	keyDir, err := key.dir(s.root)
	if err != nil {
		return nil, CommitStats{}, err
	}
	if err := s.statRoot(); err != nil {
		return nil, CommitStats{}, err
	}
	files, err := scanTree(srcDir)
	if err != nil {
		return nil, CommitStats{}, err
	}

	unlockKey, err := lockKey(ctx, keyDir)
	if err != nil {
		return nil, CommitStats{}, s.classify(err)
	}
	defer unlockKey()
	unlockStore, err := s.lockStore(ctx, false)
	if err != nil {
		return nil, CommitStats{}, s.classify(err)
	}
	defer unlockStore()

	gens, err := listGenerations(keyDir)
	if err != nil {
		return nil, CommitStats{}, s.classify(err)
	}
	var gen uint64 = 1
	if len(gens) > 0 {
		gen = gens[len(gens)-1] + 1
	}

	newBytes, err := s.storeChunks(ctx, srcDir, files)
	if err != nil {
		return nil, CommitStats{}, s.classify(err)
	}
	m := &Manifest{
		Format:     manifestFormat,
		Key:        key.String(),
		Generation: gen,
		Created:    s.now().UTC(),
		Node:       node,
		Meta:       maps.Clone(meta),
		ChunkSize:  s.chunkSize,
		Files:      files,
	}
	nfiles := 0
	for _, f := range files {
		if f.Mode.IsRegular() {
			m.TotalBytes += f.Size
			nfiles++
		}
	}
	if err := m.check(gen); err != nil {
		return nil, CommitStats{}, fmt.Errorf("commit produced a bad manifest: %w", err)
	}
	if err := writeManifest(keyDir, m); err != nil {
		return nil, CommitStats{}, s.classify(err)
	}
	stats := CommitStats{
		Generation: gen,
		Files:      nfiles,
		Bytes:      m.TotalBytes,
		NewBytes:   newBytes,
		Duration:   s.now().Sub(start),
	}
	s.logger.Info("checkpoint committed", "key", m.Key, "generation", gen, "files", nfiles,
		"bytes", m.TotalBytes, "new_bytes", newBytes, "duration", stats.Duration)

	if err := s.prune(keyDir, append(gens, gen)); err != nil {
		// The commit itself succeeded; retention is retried by the next
		// commit or GC.
		s.logger.Warn("retention failed", "key", m.Key, "error", err)
	}
	return m, stats, nil
}

// scanTree lists srcDir: directories, regular files and symlinks whose target
// stays inside, parents before children. Anything else is refused.
func scanTree(srcDir string) ([]FileEntry, error) {
	fi, err := os.Stat(srcDir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint source: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: checkpoint source %s is not a directory", ErrInvalid, srcDir)
	}
	var files []FileEntry
	err = filepath.WalkDir(srcDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == srcDir {
			return nil
		}
		rel, err := filepath.Rel(srcDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if err := checkRelPath(rel); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := FileEntry{Path: rel, Mode: info.Mode() & (fs.ModeType | fs.ModePerm), ModTime: info.ModTime().UTC()}
		switch {
		case info.IsDir():
		case info.Mode().IsRegular():
			e.Size = info.Size()
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := checkLink(rel, filepath.ToSlash(target)); err != nil {
				return err
			}
			e.Link = filepath.ToSlash(target)
		default:
			return fmt.Errorf("%w: %s: unsupported file type %s", ErrInvalid, rel, info.Mode().Type())
		}
		files = append(files, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan checkpoint source: %w", err)
	}
	return files, nil
}

// chunkJob is one chunk of one source file.
type chunkJob struct {
	src   *sharedFile
	entry *FileEntry
	index int
	off   int64
	n     int
}

// sharedFile is a source file read by several workers with ReadAt and closed
// by the last one.
type sharedFile struct {
	f       *os.File
	pending atomic.Int64
}

func (sf *sharedFile) done() {
	if sf.pending.Add(-1) == 0 {
		_ = sf.f.Close()
	}
}

// storeChunks reads, hashes and stores every chunk of the regular files in
// files (filling in Chunks and SHA256), with s.workers goroutines. It returns
// the bytes of new chunks written. Every chunk and chunk directory is durable
// when it returns nil.
func (s *Store) storeChunks(ctx context.Context, srcDir string, files []FileEntry) (int64, error) {
	root, err := os.OpenRoot(srcDir)
	if err != nil {
		return 0, fmt.Errorf("open checkpoint source: %w", err)
	}
	defer root.Close()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan chunkJob, s.workers*2)
	var (
		newBytes  atomic.Int64
		dirsMu    sync.Mutex
		dirs      = map[string]bool{}
		wg        sync.WaitGroup
		chunkSize = int64(s.chunkSize)
	)
	fail := func(err error) { cancel(err) }

	for w := 0; w < s.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, s.chunkSize)
			for job := range jobs {
				if ctx.Err() == nil {
					wrote, dir, err := s.storeChunk(job, buf)
					if err != nil {
						fail(err)
					} else if wrote {
						newBytes.Add(int64(job.n))
						dirsMu.Lock()
						dirs[dir] = true
						dirsMu.Unlock()
					}
				}
				job.src.done()
			}
		}()
	}

	func() {
		defer close(jobs)
		for i := range files {
			e := &files[i]
			if !e.Mode.IsRegular() {
				continue
			}
			n := int((e.Size + chunkSize - 1) / chunkSize)
			e.Chunks = make([]string, n)
			if n == 0 {
				continue
			}
			f, err := root.OpenFile(filepath.FromSlash(e.Path), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				fail(fmt.Errorf("open %s: %w", e.Path, err))
				return
			}
			if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() < e.Size {
				_ = f.Close()
				fail(fmt.Errorf("%s changed while committing", e.Path))
				return
			}
			sf := &sharedFile{f: f}
			sf.pending.Store(int64(n))
			for c := 0; c < n; c++ {
				job := chunkJob{src: sf, entry: e, index: c, off: int64(c) * chunkSize, n: int(min(chunkSize, e.Size-int64(c)*chunkSize))}
				select {
				case jobs <- job:
				case <-ctx.Done():
					// Account for the chunks never queued.
					for ; c < n; c++ {
						sf.done()
					}
					return
				}
			}
		}
	}()
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	for i := range files {
		if files[i].Mode.IsRegular() {
			files[i].SHA256 = treeHash(files[i].Chunks)
		}
	}
	for dir := range dirs {
		if err := syncDir(dir); err != nil {
			return 0, err
		}
	}
	hook(stepChunksSynced)
	return newBytes.Load(), nil
}

// storeChunk reads and hashes one chunk into buf and stores it unless the
// store already holds it. It reports whether it wrote the chunk and in which
// directory.
func (s *Store) storeChunk(job chunkJob, buf []byte) (bool, string, error) {
	b := buf[:job.n]
	n, err := job.src.f.ReadAt(b, job.off)
	if n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return false, "", fmt.Errorf("read %s: %w (file changed while committing?)", job.entry.Path, err)
	}
	sum := sha256.Sum256(b)
	d := hex.EncodeToString(sum[:])
	job.entry.Chunks[job.index] = d

	final := s.chunkPath(d)
	if fi, err := os.Stat(final); err == nil && fi.Size() == int64(len(b)) {
		return false, "", nil
	}
	tmp, err := os.CreateTemp(s.tmpDir(), "chunk-*")
	if err != nil {
		return false, "", fmt.Errorf("create chunk: %w", err)
	}
	name := tmp.Name()
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		_ = os.Remove(name)
		return false, "", fmt.Errorf("write chunk: %w", err)
	}
	hook(stepChunkTempWritten)
	if err := syscall.Fdatasync(int(tmp.Fd())); err != nil {
		_ = tmp.Close()
		_ = os.Remove(name)
		return false, "", fmt.Errorf("fsync chunk: %w", err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(name)
		return false, "", fmt.Errorf("close chunk: %w", err)
	}
	if err := os.Rename(name, final); err != nil {
		_ = os.Remove(name)
		return false, "", fmt.Errorf("publish chunk: %w", err)
	}
	hook(stepChunkPublished)
	return true, filepath.Dir(final), nil
}

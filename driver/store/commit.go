package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
// A commit whose meta orders it (MetaStep, MetaSequence) before the key's
// newest generation is refused with ErrStale, under the key lock, before
// anything is written: a late commit never replaces a newer generation.
//
// Names are bytes and round-trip exactly. A hard link to a file the owner of
// srcDir does not own is refused (ErrHardLink, naming the file).
//
// After publishing, manifests beyond Options.Retain are deleted; unreferenced
// chunks are left for GC.
func (s *Store) Commit(ctx context.Context, key Key, srcDir string, node string, meta map[string]string) (*Manifest, CommitStats, error) {
	src, err := openSource(srcDir)
	if err != nil {
		return nil, CommitStats{}, err
	}
	defer src.Close()
	return s.CommitRoot(ctx, key, src, node, meta)
}

// CommitRoot is Commit reading the tree below src. Every file is reached
// through src (os.Root), so a tree whose entries are swapped for symlinks
// while it is read can never make the store read outside it.
func (s *Store) CommitRoot(ctx context.Context, key Key, src *os.Root, node string, meta map[string]string) (*Manifest, CommitStats, error) {
	return s.eng.Commit(ctx, key, src, node, meta)
}

// commit is CommitRoot on a directory store: commitDir, taking back the
// chunks it published when it fails after that.
func (s *dirEngine) Commit(ctx context.Context, key Key, src *os.Root, node string, meta map[string]string) (*Manifest, CommitStats, error) {
	m, stats, published, err := s.commitDir(ctx, key, src, node, meta)
	if err != nil && len(published) > 0 {
		s.dropFailedChunks(published)
	}
	return m, stats, err
}

// commitDir is CommitRoot on a directory store. It also returns the chunks
// it published, for commit to take back when it fails after that.
func (s *Store) commitDir(ctx context.Context, key Key, src *os.Root, node string, meta map[string]string) (
	_ *Manifest, _ CommitStats, published []string, err error) {
	start := s.now()
	keyDir, err := key.dir(s.root)
	if err != nil {
		return nil, CommitStats{}, published, err
	}
	if err := s.statRoot(); err != nil {
		return nil, CommitStats{}, published, err
	}
	files, err := ScanTree(src)
	if err != nil {
		return nil, CommitStats{}, published, err
	}

	unlockKey, err := lockKey(ctx, keyDir)
	if err != nil {
		return nil, CommitStats{}, published, s.classify(err)
	}
	defer unlockKey()
	unlockStore, err := s.lockStore(ctx, false)
	if err != nil {
		return nil, CommitStats{}, published, s.classify(err)
	}
	defer unlockStore()

	gens, err := listGenerations(keyDir)
	if err != nil {
		return nil, CommitStats{}, published, s.classify(err)
	}
	if err := checkNotStale(keyDir, gens, meta); err != nil {
		return nil, CommitStats{}, published, s.classify(err)
	}
	var gen uint64 = 1
	if len(gens) > 0 {
		gen = gens[len(gens)-1] + 1
	}

	newBytes, published, err := s.storeChunksNew(ctx, src, files)
	if err != nil {
		return nil, CommitStats{}, published, s.classify(err)
	}
	m, nfiles := NewManifest(key, node, meta, s.chunkSize, s.now().UTC(), files)
	m.Generation = gen
	if err := m.Check(gen); err != nil {
		return nil, CommitStats{}, published, fmt.Errorf("commit produced a bad manifest: %w", err)
	}
	if err := publishManifest(keyDir, m); err != nil {
		return nil, CommitStats{}, published, s.classify(err)
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
	return m, stats, nil, nil
}

// openSource opens the checkpoint source directory srcDir.
func openSource(srcDir string) (*os.Root, error) {
	fi, err := os.Stat(srcDir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint source: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: checkpoint source %s is not a directory", ErrInvalid, srcDir)
	}
	src, err := os.OpenRoot(srcDir)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint source: %w", err)
	}
	return src, nil
}

// ChunkJob is one chunk of one source file: chunk Index of Entry, whose
// digest the engine that stores it writes into Entry.Chunks[Index]. Done
// must be called once the chunk is handled.
type ChunkJob struct {
	src   *sharedFile
	Entry *FileEntry
	Index int
	off   int64
	n     int
}

// Done releases the job's hold on its source file.
func (j ChunkJob) Done() { j.src.done() }

// sharedFile is a source file read by several workers (each chunk mapped on
// its own, or read with ReadAt) and closed by the last one.
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
//
// Workers hash chunks straight from a read-only map of each chunk (one at a
// time: memory stays bounded whatever the file size), record a chunk in a
// hole of its file as zeros without reading it (see sparse.go), and write
// new ones to temp files with O_DIRECT (buffered plus an early
// writeback where the file system refuses it). Durability is batched: once
// all are written, the temp files are fdatasynced in parallel, renamed into
// place, and the chunk directories fsynced, which costs a few journal commits
// instead of one per chunk.
func (s *Store) storeChunks(ctx context.Context, root *os.Root, files []FileEntry) (int64, error) {
	n, _, err := s.storeChunksNew(ctx, root, files)
	return n, err
}

// storeChunksNew is storeChunks that also returns the chunks it published
// (new to the store), also when it fails after publishing some.
func (s *Store) storeChunksNew(ctx context.Context, root *os.Root, files []FileEntry) (int64, []string, error) {
	tStart := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan ChunkJob, s.workers*2)
	cw := &chunkWriter{store: s, seen: map[string]bool{}}
	var wg sync.WaitGroup
	for w := 0; w < s.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cw.work(ctx, cancel, jobs)
		}()
	}
	s.QueueChunks(ctx, cancel, root, files, jobs)
	wg.Wait()
	tWritten := time.Now()
	if err := context.Cause(ctx); err != nil {
		removeTemps(cw.pending)
		return 0, nil, err
	}
	published := make([]string, 0, len(cw.pending))
	for _, pc := range cw.pending {
		published = append(published, pc.final)
	}
	if n, err := s.publishChunks(cw.pending); err != nil {
		return 0, published[:n], err
	}
	tPublished := time.Now()
	dirs, err := s.syncChunkDirs(cw.seen)
	if err != nil {
		return 0, published, err
	}
	for i := range files {
		if files[i].Mode.IsRegular() {
			files[i].SHA256 = TreeHash(files[i].Chunks)
		}
	}
	Hook(StepChunksSynced)
	s.logger.Debug("chunks stored", "write_duration", tWritten.Sub(tStart), "publish_duration", tPublished.Sub(tWritten),
		"dir_sync_duration", time.Since(tPublished), "new_chunks", len(cw.pending), "chunk_dirs", dirs)
	return cw.newBytes.Load(), published, nil
}

// chunkWriter is the state the workers of one storeChunks share.
type chunkWriter struct {
	store    *Store
	mu       sync.Mutex
	pending  []pendingChunk  // new chunks written to temp files
	seen     map[string]bool // digests written or found by this commit
	newBytes atomic.Int64
}

// work handles jobs until the channel closes; after the first error (which
// cancels ctx) it only drains, so every source file is still released.
func (cw *chunkWriter) work(ctx context.Context, cancel context.CancelCauseFunc, jobs <-chan ChunkJob) {
	GuardFaults()
	var buf []byte
	bounce := alignedBuf(directAlign)
	for job := range jobs {
		if ctx.Err() == nil {
			if err := cw.handle(job, &buf, bounce); err != nil {
				cancel(err)
			}
		}
		job.src.done()
	}
}

// handle hashes one chunk and writes it unless this commit or the store
// already has it.
func (cw *chunkWriter) handle(job ChunkJob, buf *[]byte, bounce []byte) error {
	b, mapping, err := cw.store.hashChunk(job, buf)
	defer unmapFile(mapping)
	if err != nil {
		return err
	}
	d := job.Entry.Chunks[job.Index]
	cw.mu.Lock()
	dup := cw.seen[d]
	cw.seen[d] = true
	cw.mu.Unlock()
	if dup {
		return nil
	}
	pc, err := cw.store.writeChunk(d, b, bounce)
	if err != nil || pc.tmp == "" {
		return err
	}
	cw.newBytes.Add(int64(job.n))
	cw.mu.Lock()
	cw.pending = append(cw.pending, pc)
	cw.mu.Unlock()
	return nil
}

// QueueChunks opens every regular file in files and queues its chunks on
// jobs, then closes jobs. A file it cannot open, or one that changed since
// the scan, cancels ctx.
func (s *Store) QueueChunks(ctx context.Context, cancel context.CancelCauseFunc, root *os.Root, files []FileEntry, jobs chan<- ChunkJob) {
	defer close(jobs)
	chunkSize := int64(s.chunkSize)
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
		sf, err := openShared(root, e, n)
		if err != nil {
			cancel(err)
			return
		}
		for c := 0; c < n; c++ {
			job := ChunkJob{src: sf, Entry: e, Index: c, off: int64(c) * chunkSize, n: int(min(chunkSize, e.Size-int64(c)*chunkSize))}
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
}

// openShared opens e for n chunk jobs. The open does not block: a FIFO swapped in after the scan is
// refused, never waited on.
func openShared(root *os.Root, e *FileEntry, n int) (*sharedFile, error) {
	f, err := root.OpenFile(filepath.FromSlash(e.Path), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", e.Path, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() < e.Size {
		_ = f.Close()
		return nil, fmt.Errorf("%s changed while committing", e.Path)
	} else if err := e.sameFile(fi); err != nil {
		_ = f.Close()
		return nil, err
	}
	sf := &sharedFile{f: f}
	sf.pending.Store(int64(n))
	return sf, nil
}

// publishChunks makes the temp files durable and renames them into place,
// and returns how many it renamed (the first ones of pending). On error no
// temp file is left behind.
func (s *Store) publishChunks(pending []pendingChunk) (int, error) {
	if err := parallel(s.workers, len(pending), func(i int) error {
		return fdatasyncPath(pending[i].tmp)
	}); err != nil {
		removeTemps(pending)
		return 0, fmt.Errorf("fsync chunks: %w", err)
	}
	for i, pc := range pending {
		if err := os.Rename(pc.tmp, pc.final); err != nil {
			removeTemps(pending[i:])
			return i, fmt.Errorf("publish chunk: %w", err)
		}
		Hook(StepChunkPublished)
	}
	return len(pending), nil
}

// syncChunkDirs fsyncs the directory of every chunk the manifest will
// reference, not only of those written here: a chunk found present may have
// been renamed in by a concurrent commit that has not synced its directory
// yet. It returns how many directories it synced.
func (s *Store) syncChunkDirs(digests map[string]bool) (int, error) {
	dirs := map[string]bool{}
	for d := range digests {
		dirs[filepath.Dir(s.chunkPath(d))] = true
	}
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	return len(dirList), parallel(s.workers, len(dirList), func(i int) error { return syncDir(dirList[i]) })
}

// removeTemps removes the temp files of chunks not yet published.
func removeTemps(pending []pendingChunk) {
	for _, pc := range pending {
		_ = os.Remove(pc.tmp)
	}
}

// pendingChunk is a new chunk written to tmp, to be synced and renamed to
// final.
type pendingChunk struct{ tmp, final string }

// hashChunk records the digest of one chunk and returns its bytes: zeros
// for a chunk in a hole of its file (not read), else a map of the chunk
// (mapping, for the caller to unmap once done with b), or *buf (allocated on
// first use) read with pread when the chunk could not be mapped.
func (s *Store) hashChunk(job ChunkJob, buf *[]byte) (b, mapping []byte, err error) {
	if inHole(job.src.f, job.off, job.n) {
		job.Entry.Chunks[job.Index] = ZeroDigest(job.n)
		return s.zeroChunk()[:job.n], nil, nil
	}
	if b, mapping, err = mapRange(job.src.f, job.off, job.n); err != nil {
		if *buf == nil {
			*buf = alignedBuf(s.chunkSize)
		}
		b, mapping = (*buf)[:job.n], nil
		if err := readChunkAt(job, b); err != nil {
			return nil, nil, err
		}
	}
	sum, err := sumMapped(b)
	if err != nil {
		return nil, mapping, fmt.Errorf("read %s: %w", job.Entry.Path, err)
	}
	job.Entry.Chunks[job.Index] = hex.EncodeToString(sum[:])
	return b, mapping, nil
}

// readChunkAt reads job's chunk into b (len job.n) with pread.
func readChunkAt(job ChunkJob, b []byte) error {
	n, err := job.src.f.ReadAt(b, job.off)
	if n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("read %s: %w (file changed while committing?)", job.Entry.Path, err)
	}
	return nil
}

// CopyChunk copies one chunk into *buf (allocated on first use), for the
// object engine: the HTTP transport reads a request body on goroutines of
// its own, where a fault on a map of a file that shrank would crash the
// process, so it is never given a map itself. The copy is hashed and
// uploaded, so what is uploaded is what its name says whatever the file
// does meanwhile. A chunk in a hole of
// its file is zeros, not read (zero is true; see sparse.go); others are
// copied from a map of the chunk alone, or read with pread where it cannot
// be mapped.
func (s *Store) CopyChunk(job ChunkJob, buf *[]byte) (b []byte, zero bool, err error) {
	if len(*buf) < s.chunkSize {
		*buf = make([]byte, s.chunkSize)
	}
	b = (*buf)[:job.n]
	if inHole(job.src.f, job.off, job.n) {
		clear(b)
		return b, true, nil
	}
	src, mapping, err := mapRange(job.src.f, job.off, job.n)
	if err != nil {
		return b, false, readChunkAt(job, b)
	}
	defer unmapFile(mapping)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("read %s: %w", job.Entry.Path, errFault{r})
		}
	}()
	copy(b, src)
	return b, false, nil
}

// writeChunk writes chunk b with digest d to a temp file (with O_DIRECT where
// possible, else starting its writeback), unless the store already holds it
// (then tmp is empty). bounce is the worker's aligned block buffer.
func (s *Store) writeChunk(d string, b, bounce []byte) (pendingChunk, error) {
	final := s.chunkPath(d)
	if fi, err := os.Stat(final); err == nil && fi.Size() == int64(len(b)) {
		return pendingChunk{}, nil
	}
	name := filepath.Join(s.tmpDir(), "chunk-"+d[:16]+"-"+RandomSuffix())
	f, direct, err := openDirect(func(flag int) (*os.File, error) {
		return os.OpenFile(name, flag, filePerm)
	}, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return pendingChunk{}, fmt.Errorf("create chunk: %w", err)
	}
	var isDirect atomic.Bool
	isDirect.Store(direct)
	padded, err := writeAtAligned(f, &isDirect, b, 0, true, bounce)
	if err == nil && padded {
		err = f.Truncate(int64(len(b)))
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(name)
		return pendingChunk{}, fmt.Errorf("write chunk: %w", err)
	}
	if !isDirect.Load() {
		startWriteback(f, 0, 0)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(name)
		return pendingChunk{}, fmt.Errorf("close chunk: %w", err)
	}
	Hook(StepChunkTempWritten)
	return pendingChunk{tmp: name, final: final}, nil
}

// fdatasyncPath makes the data of the file at p durable.
func fdatasyncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := fdatasync(f); err != nil {
		return fmt.Errorf("fsync %s: %w", p, err)
	}
	return nil
}

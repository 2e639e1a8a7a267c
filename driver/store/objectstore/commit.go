package objectstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
)

// maxPublishTries bounds how many generation numbers a commit tries when
// concurrent commits of the key take them first.
const maxPublishTries = 64

// commit is CommitRoot for an object store. Chunks are uploaded (those
// the store lacks: found by a HEAD of their name, or by a conditional create
// once the commit's new chunks prove new) and confirmed by the server before
// the manifest is written; the manifest is written with a
// conditional create, so two commits can never publish the same generation,
// and a failed or killed commit leaves only unreferenced chunks for GC.
func (s *engine) Commit(ctx context.Context, key store.Key, src *os.Root, node string, meta map[string]string) (*store.Manifest, store.CommitStats, error) {
	start := time.Now()
	prefix, err := keyObjectPrefix(key)
	if err != nil {
		return nil, store.CommitStats{}, err
	}
	if err := store.CheckOrderMeta(meta); err != nil {
		return nil, store.CommitStats{}, err
	}
	files, err := store.ScanTree(src)
	if err != nil {
		return nil, store.CommitStats{}, err
	}
	if err := s.checkMarker(ctx); err != nil {
		return nil, store.CommitStats{}, err
	}
	lk, err := s.keyLock(ctx, prefix, key, true)
	if err != nil {
		return nil, store.CommitStats{}, err
	}
	defer s.release(lk)
	l, err := s.acquireLease(ctx, "commit", key)
	if err != nil {
		return nil, store.CommitStats{}, err
	}
	defer s.release(l)

	gens, err := s.objectGenerations(ctx, prefix)
	if err != nil {
		return nil, store.CommitStats{}, err
	}
	parent, err := s.checkNotStaleObject(ctx, prefix, gens, meta)
	if err != nil {
		return nil, store.CommitStats{}, err
	}
	newBytes, err := s.uploadChunks(ctx, src, files, chunkSet(parent), s.touchBefore(l.at))
	if err != nil {
		return nil, store.CommitStats{}, err
	}
	m, nfiles := store.NewManifest(key, node, meta, s.chunkSize, time.Now().UTC(), files)
	next := uint64(1)
	if len(gens) > 0 {
		next = gens[len(gens)-1] + 1
	}
	if err := s.stillHeld(ctx, lk, key); err != nil {
		return nil, store.CommitStats{}, err
	}
	if err := s.publishObject(ctx, prefix, m, next, meta); err != nil {
		return nil, store.CommitStats{}, err
	}
	gens = append(gens, m.Generation)
	stats := store.CommitStats{Generation: m.Generation, Files: nfiles, Bytes: m.TotalBytes, NewBytes: newBytes, Duration: time.Now().Sub(start)}
	s.logger.Info("checkpoint committed", "key", m.Key, "generation", m.Generation, "files", nfiles,
		"bytes", m.TotalBytes, "new_bytes", newBytes, "duration", stats.Duration)
	if err := s.pruneObject(ctx, prefix, gens); err != nil {
		s.logger.Warn("retention failed", "key", m.Key, "error", err)
	}
	return m, stats, nil
}

// checkNotStaleObject is checkNotStale reading manifests from the backend.
// It returns the newest of gens whose manifest parses (nil when none does),
// whose chunks the commit expects to find in the store. Without ordering
// meta a failure to read it is no error: the commit then expects nothing.
func (s *engine) checkNotStaleObject(ctx context.Context, prefix string, gens []uint64, meta map[string]string) (*store.Manifest, error) {
	p := store.PositionOf(meta)
	for _, g := range slices.Backward(gens) {
		m, err := s.readObjectManifest(ctx, prefix, g)
		switch {
		case err == nil:
			if q := store.PositionOf(m.Meta); p.HasSequence() && p.OlderThan(q) {
				return nil, fmt.Errorf("%w: %s is older than generation %d (%s)", store.ErrStale, p, g, q)
			}
			return m, nil
		case errors.Is(err, store.ErrCorrupt), errors.Is(err, store.ErrObjectNotFound):
			continue
		case !p.HasSequence():
			s.logger.Debug("previous manifest not read", "generation", g, "error", err)
			return nil, nil
		default:
			return nil, err
		}
	}
	return nil, nil
}

// chunkSet returns the digests of the chunks m names (none for nil).
func chunkSet(m *store.Manifest) map[string]bool {
	set := map[string]bool{}
	if m != nil {
		for _, f := range m.Files {
			for _, c := range f.Chunks {
				set[c] = true
			}
		}
	}
	return set
}

// publishObject writes m as generation gen with a conditional create; when
// a concurrent commit took gen, it checks that one for staleness and tries
// the next number. Then it points the key's latest pointer at it.
func (s *engine) publishObject(ctx context.Context, prefix string, m *store.Manifest, gen uint64, meta map[string]string) error {
	for range maxPublishTries {
		m.Generation = gen
		if err := m.Check(gen); err != nil {
			return fmt.Errorf("commit produced a bad manifest: %w", err)
		}
		b, err := json.MarshalIndent(m, "", " ")
		if err != nil {
			return fmt.Errorf("encode manifest: %w", err)
		}
		if err := store.CheckEncoded(b, m); err != nil {
			return err
		}
		store.Hook(store.StepManifestTempWritten)
		err = s.backend.Put(ctx, prefix+store.ManifestName(gen), b, true)
		if errors.Is(err, store.ErrObjectExists) {
			if _, err := s.checkNotStaleObject(ctx, prefix, []uint64{gen}, meta); err != nil {
				return err
			}
			gen++
			continue
		}
		if err != nil {
			return fmt.Errorf("publish manifest: %w", err)
		}
		store.Hook(store.StepManifestPublished)
		p, _ := json.Marshal(latestPointer{Generation: gen})
		if err := s.backend.Put(ctx, prefix+objLatest, p, false); err != nil {
			// Published all the same: readers probe past a stale pointer.
			s.logger.Warn("latest pointer not updated", "key", m.Key, "generation", gen, "error", err)
		}
		store.Hook(store.StepCommitted)
		return nil
	}
	return fmt.Errorf("publish manifest: %d generations taken by concurrent commits", maxPublishTries)
}

// uploadChunks hashes every chunk of the regular files in files (filling in
// Chunks and SHA256) and uploads those the backend lacks, with s.workers
// goroutines, each holding at most one chunk (a slice of the file's map, or
// one chunk-sized buffer). known holds the digests of the chunks the key's
// newest manifest names (see chunkUploader.upload). It returns the bytes
// uploaded.
// Every chunk is confirmed by the server when it returns nil.
func (s *engine) uploadChunks(ctx context.Context, root *os.Root, files []store.FileEntry, known map[string]bool, touchBefore time.Time) (int64, error) {
	tStart := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan store.ChunkJob, s.workers*2)
	u := &chunkUploader{s: s, known: known, touchBefore: touchBefore, seen: map[string]bool{}}
	var (
		uploaded atomic.Int64
		count    atomic.Int64
		wg       sync.WaitGroup
		// firstErr keeps the first upload's error: one that ends as the
		// caller's deadline passes cannot become ctx's cause (ctx is
		// done already), and it says why (the store's last answer).
		firstErr     error
		firstErrOnce sync.Once
	)
	for w := 0; w < s.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			store.GuardFaults()
			var buf []byte
			for job := range jobs {
				if ctx.Err() == nil {
					n, err := u.upload(ctx, job, &buf)
					if err != nil {
						firstErrOnce.Do(func() { firstErr = err })
						cancel(err)
					}
					if n > 0 {
						uploaded.Add(n)
						count.Add(1)
					}
				}
				job.Done()
			}
		}()
	}
	s.st.QueueChunks(ctx, cancel, root, files, jobs)
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	for i := range files {
		if files[i].Mode.IsRegular() {
			files[i].SHA256 = store.TreeHash(files[i].Chunks)
		}
	}
	store.Hook(store.StepChunksSynced)
	s.logger.Debug("chunks uploaded", "duration", time.Since(tStart), "new_chunks", count.Load(), "new_bytes", uploaded.Load(),
		"lookups", u.lookups.Load(), "creates", u.creates.Load(), "creates_refused", u.refused.Load())
	return uploaded.Load(), nil
}

// createAfterMisses is how many lookups in a row of chunks the key's newest
// manifest does not name must find nothing before a commit creates such
// chunks without looking them up first (see chunkUploader.upload).
const createAfterMisses = 8

// chunkUploader is one commit's upload state, shared by its workers.
type chunkUploader struct {
	s           *engine
	known       map[string]bool // digests the key's newest manifest names
	touchBefore time.Time

	mu   sync.Mutex
	seen map[string]bool // digests this commit has handled

	// misses counts the lookups in a row of chunks known does not name
	// that found nothing; a lookup that finds one, or a refused create,
	// zeroes it.
	misses                    atomic.Int64
	lookups, creates, refused atomic.Int64 // for the log
}

// upload hashes one chunk and uploads it unless this commit already did or
// the backend holds an object of its name and size; one held but last
// written before touchBefore is touched (see touchChunk). It returns the
// bytes uploaded.
//
// A chunk is normally looked up (HEAD) first and uploaded only when
// missing. Once createAfterMisses lookups in a row of chunks the key's
// newest manifest does not name have found nothing (the checkpoint's new
// data), the next such chunks are created at once, conditionally
// (If-None-Match: *), saving the server a request per new chunk; a create
// the server refuses (the chunk is there: another key's, or a failed
// commit's) is handled as a chunk the lookup found, and sends the commit
// back to looking unnamed chunks up. So a commit of data the store already
// holds under other keys looks every chunk up and sends no chunk's bytes
// again, except those of the few creates in flight when the first is
// refused. Chunks the newest manifest names are always looked up.
func (u *chunkUploader) upload(ctx context.Context, job store.ChunkJob, buf *[]byte) (int64, error) {
	s := u.s
	b, zero, err := s.st.CopyChunk(job, buf)
	if err != nil {
		return 0, err
	}
	var sum [sha256.Size]byte
	if zero {
		_, _ = hex.Decode(sum[:], []byte(store.ZeroDigest(len(b))))
	} else {
		sum = sha256.Sum256(b)
	}
	d := hex.EncodeToString(sum[:])
	job.Entry.Chunks[job.Index] = d
	u.mu.Lock()
	dup := u.seen[d]
	u.seen[d] = true
	u.mu.Unlock()
	if dup {
		return 0, nil
	}
	name := chunkObject(d)
	unnamed := !u.known[d]
	if unnamed && u.misses.Load() >= createAfterMisses {
		u.creates.Add(1)
		err := s.putChunk(ctx, name, b, sum, true)
		if err == nil {
			store.Hook(store.StepChunkTempWritten)
			return int64(len(b)), nil
		}
		if !errors.Is(err, store.ErrObjectExists) {
			return 0, fmt.Errorf("upload chunk: %w", err)
		}
		u.refused.Add(1)
		u.misses.Store(0)
	}
	u.lookups.Add(1)
	fi, err := s.backend.Stat(ctx, name)
	if err == nil && fi.Size == int64(len(b)) {
		if unnamed {
			u.misses.Store(0)
		}
		if fi.Modified.Before(u.touchBefore) {
			return s.touchChunk(ctx, name, b)
		}
		return 0, nil
	}
	if err != nil && !errors.Is(err, store.ErrObjectNotFound) {
		return 0, fmt.Errorf("stat chunk: %w", err)
	}
	if unnamed && err != nil {
		u.misses.Add(1)
	}
	if err := s.putChunk(ctx, name, b, sum, false); err != nil {
		return 0, fmt.Errorf("upload chunk: %w", err)
	}
	store.Hook(store.StepChunkTempWritten)
	return int64(len(b)), nil
}

// putChunk uploads chunk b (only if no object has its name, with ifAbsent:
// else ErrObjectExists), handing its SHA-256 to a backend that takes it.
func (s *engine) putChunk(ctx context.Context, name string, b []byte, sum [32]byte, ifAbsent bool) error {
	if dp, ok := s.backend.(store.DigestPutter); ok {
		return dp.PutSHA256(ctx, name, b, sum, ifAbsent)
	}
	return s.backend.Put(ctx, name, b, ifAbsent)
}

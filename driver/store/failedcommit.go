package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// dropFailedWait bounds how long a failed commit waits for other processes'
// commits and restores to let it take back its chunks.
var dropFailedWait = 2 * time.Second

// dropFailedChunks deletes the chunks a failed commit published (paths), so
// they do not hold space and inodes (on a file system out of inodes, the
// last ones) until the next GC. A chunk may be deleted only while nothing
// can be about to reference it: a commit of another key that found it
// present uses it without writing it. So it takes the store-wide lock
// exclusively, as GC does (no commit or restore in flight anywhere), and
// deletes only the chunks no manifest references (a commit that finished
// meanwhile may have). When the lock is busy (another commit or a restore
// is running) the chunks are left to GC.
func (s *Store) dropFailedChunks(paths []string) {
	ctx, cancel := context.WithTimeout(context.Background(), dropFailedWait)
	defer cancel()
	unlock, err := s.tryLockStoreExclusive(ctx)
	if err != nil {
		s.logger.Info("failed commit's new chunks left for gc", "chunks", len(paths), "reason", err)
		return
	}
	defer unlock()
	refs, err := s.referencedChunks()
	if err != nil {
		s.logger.Warn("failed commit's new chunks left for gc", "chunks", len(paths), "error", err)
		return
	}
	deleted := 0
	for _, p := range paths {
		if refs[filepath.Base(p)] {
			continue
		}
		if err := os.Remove(p); err == nil || errors.Is(err, fs.ErrNotExist) {
			deleted++
		}
	}
	s.logger.Info("failed commit's new chunks deleted", "deleted", deleted, "kept", len(paths)-deleted)
}

//go:build !linux

package store

import (
	"syscall"
	"testing"
)

// evict only syncs where posix_fadvise is unavailable: the restore benchmark
// then starts with a warm cache.
func evict(b *testing.B, dir string) { syscall.Sync() }

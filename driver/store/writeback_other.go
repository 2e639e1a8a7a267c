//go:build !linux

package store

import "os"

// startWriteback is a no-op where sync_file_range(2) does not exist.
func startWriteback(*os.File, int64, int64) {}

// fdatasync falls back to a full fsync where fdatasync(2) does not exist.
func fdatasync(f *os.File) error { return f.Sync() }

func dropCached(*os.File) {}

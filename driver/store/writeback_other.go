//go:build !linux

package store

import "os"

// startWriteback is a no-op where sync_file_range(2) does not exist.
func startWriteback(*os.File, int64, int64) {}

//go:build linux

package store

import "golang.org/x/sys/unix"

// exchange atomically swaps the directory entries a and b.
func exchange(a, b string) error {
	return exchangeErr(unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE))
}

//go:build linux

package store

import "golang.org/x/sys/unix"

// exchange atomically swaps the entries a and b of the directory dirfd.
func exchange(dirfd int, a, b string) error {
	return exchangeErr(unix.Renameat2(dirfd, a, dirfd, b, unix.RENAME_EXCHANGE))
}

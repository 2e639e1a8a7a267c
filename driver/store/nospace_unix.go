//go:build unix

package store

import "syscall"

func statFSUsage(path string) (fsUsage, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return fsUsage{}, err
	}
	return fsUsage{files: uint64(st.Files), freeFiles: uint64(st.Ffree), freeBytes: uint64(st.Bavail) * uint64(st.Bsize)}, nil
}

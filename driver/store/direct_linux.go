//go:build linux

package store

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const directFlag = syscall.O_DIRECT

// clearDirect turns O_DIRECT off on f's open file description.
func clearDirect(f *os.File) error {
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	_, err = unix.FcntlInt(f.Fd(), unix.F_SETFL, flags&^unix.O_DIRECT)
	return err
}

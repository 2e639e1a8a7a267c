package store

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/caravan-nomad/caravan/internal/bytesize"
)

// A file system can run out of inodes with space to spare (many small
// files: a store full of small chunks, a checkpoint of 200k files), and
// then says ENOSPC, "no space left on device", while df -h shows free
// space. explainNoSpace tells the two apart.

// fsUsage is what explainNoSpace needs of statfs(2).
type fsUsage struct {
	files, freeFiles uint64 // inodes: all, free
	freeBytes        uint64 // bytes available to unprivileged users
}

// statFS reads the usage of the file system holding path (a variable:
// tests stand in for a file system out of inodes).
var statFS = statFSUsage

// ErrNoInodes is wrapped (beside syscall.ENOSPC) by a write that failed
// for want of free inodes, not of space.
var ErrNoInodes = errors.New("no free inodes")

// noInodesError is an ENOSPC whose cause is the inode table: its message
// says so instead of "no space left on device".
type noInodesError struct {
	err error
	msg string
}

func (e *noInodesError) Error() string { return e.msg }

// Unwrap keeps errors.Is(err, syscall.ENOSPC) and ErrNoInodes true.
func (e *noInodesError) Unwrap() []error { return []error{e.err, ErrNoInodes} }

// explainNoSpace returns err, an ENOSPC on the file system of dir whose
// cause is that no inode is free while space is, as an error that says
// "no free inodes" and what to do; any other err unchanged.
func explainNoSpace(err error, dir string) error {
	if err == nil || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrNoInodes) {
		return err
	}
	u, serr := statFS(dir)
	if serr != nil || u.files == 0 || u.freeFiles > 0 || u.freeBytes == 0 {
		return err
	}
	what := fmt.Sprintf("no free inodes (all %d inodes of the file system of %s are used, %s of space is still free: "+
		"delete files there or make the file system with more inodes)", u.files, dir, bytesize.Human(int64(min(u.freeBytes, 1<<62))))
	msg := err.Error()
	if strings.Contains(msg, syscall.ENOSPC.Error()) {
		msg = strings.ReplaceAll(msg, syscall.ENOSPC.Error(), what)
	} else {
		msg += ": " + what
	}
	return &noInodesError{err: err, msg: msg}
}

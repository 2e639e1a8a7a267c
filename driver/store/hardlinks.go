package store

import (
	"fmt"
	"io/fs"
	"syscall"
)

// ErrHardLink is returned (wrapping ErrInvalid) by a commit whose source
// holds a regular file with more than one link that the owner of the source
// directory does not own. Where the host allows hard links to other users'
// files (fs.protected_hardlinks=0), such a link would let a task store a file
// it cannot read and get it back, owned by its user, on restore.
var ErrHardLink = fmt.Errorf("%w: hard link to a file the checkpoint directory's owner does not own", ErrInvalid)

// fileID identifies one file: its device and inode.
type fileID struct{ dev, ino uint64 }

// fileStat is what the commit checks of a file beyond its mode and size.
type fileStat struct {
	id    fileID
	uid   uint32
	nlink uint64
}

// statOf reads the identity, owner and link count of fi (from lstat or
// fstat). ok is false where the platform gives none. A variable so that tests
// can present files owned by another user without needing a host where
// fs.protected_hardlinks=0.
var statOf = func(fi fs.FileInfo) (fileStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, false
	}
	return fileStat{id: fileID{dev: uint64(st.Dev), ino: st.Ino}, uid: st.Uid, nlink: uint64(st.Nlink)}, true
}

// checkHardLink refuses a regular file rel with more than one link whose
// owner is not owner (the uid of the source directory, which the driver
// gives to the task's user). It returns the file's identity.
func checkHardLink(rel string, fi fs.FileInfo, owner uint32, haveOwner bool) (fileID, error) {
	st, ok := statOf(fi)
	if !ok {
		return fileID{}, nil
	}
	if haveOwner && st.nlink > 1 && st.uid != owner {
		return st.id, fmt.Errorf("%w: %s has %d links and is owned by uid %d, the checkpoint directory by uid %d (copy the file instead of linking it)",
			ErrHardLink, rel, st.nlink, st.uid, owner)
	}
	return st.id, nil
}

// sameFile reports an error unless fi, the file commit opened for e, is the
// file its scan listed (same device and inode): a task that swaps in another
// file, such as a hard link to a file it does not own, after the scan
// fails the commit instead of having that file read.
func (e *FileEntry) sameFile(fi fs.FileInfo) error {
	if e.id == (fileID{}) {
		return nil
	}
	if st, ok := statOf(fi); ok && st.id != e.id {
		return fmt.Errorf("%s changed while committing (another file was swapped in)", e.Path)
	}
	return nil
}

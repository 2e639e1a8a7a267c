package store

import (
	"os"
	"syscall"
)

// FileOwner is the owner given to restored files: the owner of the existing
// destination directory (the driver prepares it for the task's user). nil
// means leave ownership alone.
type FileOwner struct{ uid, gid int }

// DirOwner returns the owner of the directory base in parent when it
// exists and differs from the current process's, else nil. A symlink is
// not followed (and gives no owner).
func DirOwner(parent *os.Root, base string) *FileOwner {
	fi, err := parent.Lstat(base)
	if err != nil || !fi.IsDir() {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid() {
		return nil
	}
	return &FileOwner{uid: int(st.Uid), gid: int(st.Gid)}
}

// apply chowns name in root (the link itself when link) on a best-effort
// basis: a process that may not chown leaves files owned by itself.
func (o *FileOwner) apply(root *os.Root, name string, link bool) {
	if o == nil {
		return
	}
	if link {
		_ = root.Lchown(name, o.uid, o.gid)
		return
	}
	_ = root.Chown(name, o.uid, o.gid)
}

func (o *FileOwner) applyFile(f *os.File) {
	if o != nil {
		_ = f.Chown(o.uid, o.gid)
	}
}

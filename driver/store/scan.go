package store

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// ScanTree lists src: directories, regular files and symlinks whose target,
// resolved against src, stays inside, parents before children, siblings in
// byte order. Anything else (FIFOs, sockets, devices) is refused, and so is a
// hard link to a file the owner of src does not own (ErrHardLink). Nothing is
// followed: directories are opened and entries lstat'ed through src.
//
// Names are bytes: a name that is not valid UTF-8 is kept as it is (io/fs,
// which refuses such names, is not used). One directory is open at a time,
// only while it is listed, so a tree of any depth or width is scanned with a
// bounded number of descriptors.
func ScanTree(src *os.Root) ([]FileEntry, error) {
	w := &treeScan{src: src}
	if fi, err := src.Stat("."); err == nil {
		if st, ok := statOf(fi); ok {
			w.owner, w.haveOwner = st.uid, true
		}
	}
	err := w.dir(".")
	if err == nil {
		err = checkLinksResolve(w.files)
	}
	if err != nil {
		return nil, fmt.Errorf("scan checkpoint source: %w", err)
	}
	return w.files, nil
}

// treeScan is the state of one ScanTree.
type treeScan struct {
	src       *os.Root
	owner     uint32 // uid of the source directory
	haveOwner bool
	files     []FileEntry
}

// dir appends the entries below the directory rel ("." for the root).
func (w *treeScan) dir(rel string) error {
	ents, err := readDirSorted(w.src, rel)
	if err != nil {
		return err
	}
	for _, d := range ents {
		p := d.Name()
		if rel != "." {
			p = rel + "/" + p
		}
		if err := checkRelPath(p); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := w.entry(p, info); err != nil {
			return err
		}
		if info.IsDir() {
			if err := w.dir(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// entry appends the entry p described by info (an lstat result).
func (w *treeScan) entry(p string, info fs.FileInfo) error {
	e := FileEntry{Path: p, Mode: info.Mode() & (fs.ModeType | fs.ModePerm), ModTime: info.ModTime().UTC()}
	switch {
	case info.IsDir():
	case info.Mode().IsRegular():
		e.Size = info.Size()
		id, err := checkHardLink(p, info, w.owner, w.haveOwner)
		if err != nil {
			return err
		}
		e.id = id
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := w.src.Readlink(p)
		if err != nil {
			return err
		}
		if err := checkLink(p, target); err != nil {
			return err
		}
		e.Link = target
	default:
		return fmt.Errorf("%w: %s: unsupported file type %s", ErrInvalid, p, info.Mode().Type())
	}
	w.files = append(w.files, e)
	return nil
}

// readDirSorted lists the directory rel of src, sorted by name, and closes
// it before returning.
func readDirSorted(src *os.Root, rel string) ([]fs.DirEntry, error) {
	f, err := src.Open(rel)
	if err != nil {
		return nil, err
	}
	ents, err := f.ReadDir(-1)
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", rel, err)
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

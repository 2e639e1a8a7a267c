package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

// ckptDir is a task's checkpoint directory, reached only through the task
// directory (os.Root). The task owns everything below its task directory and
// may replace the checkpoint directory, or its parent, with a symlink or a
// special file at any moment; the driver, usually root, must never follow
// one out of the task directory. Nomad creates the task directory in the
// allocation directory, which the task cannot write, so the task directory
// itself is a safe anchor.
type ckptDir struct {
	taskDir string // absolute, Nomad's
	rel     string // below taskDir, e.g. "local/checkpoint"
}

// newCkptDir splits dir into the task directory and the part below it.
func newCkptDir(taskDir, dir string) (ckptDir, error) {
	rel, err := filepath.Rel(taskDir, dir)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return ckptDir{}, fmt.Errorf("checkpoint dir %s is not inside the task dir %s", dir, taskDir)
	}
	return ckptDir{taskDir: taskDir, rel: rel}, nil
}

// path is the directory's path as the task sees it.
func (c ckptDir) path() string { return filepath.Join(c.taskDir, c.rel) }

// openParent opens the directory holding the checkpoint directory, creating
// any missing or non-directory part of the path as a real directory (a
// symlink the task left there is removed, never followed).
func (c ckptDir) openParent() (*os.Root, string, error) {
	troot, err := os.OpenRoot(c.taskDir)
	if err != nil {
		return nil, "", fmt.Errorf("open task dir: %w", err)
	}
	defer troot.Close()
	parts := strings.Split(c.rel, string(filepath.Separator))
	cur := ""
	for _, p := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, p)
		if err := ensureDir(troot, cur); err != nil {
			return nil, "", err
		}
	}
	parent := troot
	if cur != "" {
		if parent, err = troot.OpenRoot(cur); err != nil {
			return nil, "", fmt.Errorf("open %s: %w", cur, err)
		}
	} else if parent, err = troot.OpenRoot("."); err != nil {
		return nil, "", err
	}
	return parent, parts[len(parts)-1], nil
}

// ensureDir makes name in root a real directory: a symlink, FIFO or file
// the task put there is removed (the entry itself) and a directory made.
func ensureDir(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		if err := root.Remove(name); err != nil {
			return fmt.Errorf("replace non-directory %s: %w", name, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("checkpoint dir: %w", err)
	}
	if err := root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create checkpoint dir: %w", err)
	}
	return nil
}

// prepare makes the checkpoint directory a real directory owned by uid:gid
// (when uid >= 0) and returns its parent, opened, and its name there.
func (c ckptDir) prepare(uid, gid int) (*os.Root, string, error) {
	parent, base, err := c.openParent()
	if err != nil {
		return nil, "", err
	}
	if err := ensureDir(parent, base); err != nil {
		parent.Close()
		return nil, "", err
	}
	if uid >= 0 {
		// Lchown: if the task swapped a link in since, the link is chowned,
		// not what it points to.
		if err := parent.Lchown(base, uid, gid); err != nil {
			parent.Close()
			return nil, "", fmt.Errorf("checkpoint dir: chown: %w", err)
		}
	}
	return parent, base, nil
}

// open opens the checkpoint directory itself.
func (c ckptDir) open() (*os.Root, error) {
	parent, base, err := c.openParent()
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	if fi, err := parent.Lstat(base); err != nil {
		return nil, fmt.Errorf("checkpoint dir: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint dir %s is a %s, not a directory", c.path(), fi.Mode().Type())
	}
	return parent.OpenRoot(base)
}

// readMarker reads the marker in the checkpoint directory (a regular file
// only, never blocking; see protocol.ReadMarkerIn).
func (c ckptDir) readMarker() (*protocol.Marker, error) {
	root, err := c.open()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", protocol.ErrNoMarker, err)
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return protocol.ReadMarkerIn(root)
}

// emptyDir removes the contents of the directory base in parent, keeping it
// (and its owner). Entries are removed, never followed.
func emptyDir(parent *os.Root, base string) error {
	root, err := parent.OpenRoot(base)
	if err != nil {
		return fmt.Errorf("empty checkpoint dir: %w", err)
	}
	defer root.Close()
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("empty checkpoint dir: %w", err)
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return fmt.Errorf("empty checkpoint dir: %w", err)
	}
	for _, n := range names {
		if err := root.RemoveAll(n); err != nil {
			return fmt.Errorf("empty checkpoint dir: %w", err)
		}
	}
	return nil
}

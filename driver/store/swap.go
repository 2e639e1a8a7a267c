package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// swapDir makes the complete directory tmp become base, both entries of
// parent, then removes the old contents of base (a symlink there is removed,
// never followed). Nothing is fsynced: a restored tree is a working copy that
// the next task start restores again. With renameat2(RENAME_EXCHANGE) the
// swap is one atomic step. Where exchange is unsupported it falls back to two
// renames (base to .<base>.old-*, tmp to base); a crash between them leaves
// no base but two complete directories, never a mix, and the next Restore
// cleans up.
func swapDir(parent *os.Root, tmp, base string) error {
	if _, err := parent.Lstat(base); errors.Is(err, os.ErrNotExist) {
		if err := parent.Rename(tmp, base); err != nil {
			return fmt.Errorf("move restored directory into place: %w", err)
		}
		return nil
	}
	err := exchangeIn(parent, tmp, base)
	if err == nil {
		// tmp now holds the old contents.
		_ = parent.RemoveAll(tmp)
		return nil
	}
	if !errors.Is(err, errExchangeUnsupported) {
		return fmt.Errorf("swap restored directory into place: %w", err)
	}
	old := "." + base + ".old-" + RandomSuffix()
	if err := parent.Mkdir(old, 0o700); err != nil {
		return fmt.Errorf("swap restored directory into place: %w", err)
	}
	oldPath := old + "/d"
	if err := parent.Rename(base, oldPath); err != nil {
		_ = parent.Remove(old)
		return fmt.Errorf("move old directory aside: %w", err)
	}
	if err := parent.Rename(tmp, base); err != nil {
		// Put the old one back.
		_ = parent.Rename(oldPath, base)
		_ = parent.RemoveAll(old)
		return fmt.Errorf("move restored directory into place: %w", err)
	}
	_ = parent.RemoveAll(old)
	return nil
}

// exchangeIn swaps the entries a and b of dir.
func exchangeIn(dir *os.Root, a, b string) error {
	d, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return exchangeFn(int(d.Fd()), a, b)
}

var errExchangeUnsupported = errors.New("atomic exchange unsupported")

// exchangeFn is exchange, replaceable by tests of the two-rename fallback.
var exchangeFn = exchange

// exchangeErr maps "not supported" errnos to errExchangeUnsupported.
func exchangeErr(err error) error {
	if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) {
		return fmt.Errorf("%w: %w", errExchangeUnsupported, err)
	}
	return err
}

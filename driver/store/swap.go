package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// swapDir makes the complete directory tmp become dst, then removes the old
// contents of dst. Nothing is fsynced: a restored tree is a working copy that
// the next task start restores again. With renameat2(RENAME_EXCHANGE) the swap is one atomic
// step. Where exchange is unsupported it falls back to two renames (dst to
// .<base>.old-*, tmp to dst); a crash between them leaves no dst but two
// complete directories, never a mix, and the next Restore cleans up.
func swapDir(tmp, dst, parent, base string) error {
	if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(tmp, dst); err != nil {
			return fmt.Errorf("move restored directory into place: %w", err)
		}
		return nil
	}
	err := exchangeFn(tmp, dst)
	if err == nil {
		// tmp now holds the old contents.
		_ = os.RemoveAll(tmp)
		return nil
	}
	if !errors.Is(err, errExchangeUnsupported) {
		return fmt.Errorf("swap restored directory into place: %w", err)
	}
	old, err := os.MkdirTemp(parent, "."+base+".old-")
	if err != nil {
		return fmt.Errorf("swap restored directory into place: %w", err)
	}
	oldPath := filepath.Join(old, "d")
	if err := os.Rename(dst, oldPath); err != nil {
		_ = os.Remove(old)
		return fmt.Errorf("move old directory aside: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		// Put the old one back.
		_ = os.Rename(oldPath, dst)
		_ = os.RemoveAll(old)
		return fmt.Errorf("move restored directory into place: %w", err)
	}
	_ = os.RemoveAll(old)
	return nil
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

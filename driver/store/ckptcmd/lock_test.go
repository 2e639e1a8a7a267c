package ckptcmd

import (
	"os"
	"syscall"
	"testing"

	"github.com/shoenig/test/must"
)

// holdLock flocks path exclusively through its own open file description,
// as a driver committing the key does (flock locks of two descriptions
// conflict even within one process), until the returned func is called.
func holdLock(t *testing.T, path string) func() {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must.NoError(t, err)
	must.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}
}

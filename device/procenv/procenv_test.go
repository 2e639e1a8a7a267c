package procenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

func TestLookup(t *testing.T) {
	root := t.TempDir()
	must.NoError(t, os.MkdirAll(filepath.Join(root, "42"), 0o755))
	env := "A=1\x00B=x=y\x00=bad\x00NOEQ\x00C=\x00A_LONGER=2"
	must.NoError(t, os.WriteFile(filepath.Join(root, "42", "environ"), []byte(env), 0o644))
	must.NoError(t, os.MkdirAll(filepath.Join(root, "self"), 0o755))

	got, err := Lookup(root, 42, "A", "B", "C", "A_LONGER", "MISSING")
	must.NoError(t, err)
	must.Eq(t, map[string]string{"A": "1", "B": "x=y", "C": "", "A_LONGER": "2"}, got)

	_, err = Lookup(root, 43, "A")
	must.ErrorIs(t, err, os.ErrNotExist)

	pids, err := PIDs(root)
	must.NoError(t, err)
	must.Eq(t, []int{42}, pids)
}

func TestLookup_OwnProcess(t *testing.T) {
	t.Setenv("CARAVAN_PROCENV_TEST", "yes")
	// The initial environment is what procfs shows: a variable set now is
	// not in it, one inherited is.
	got, err := Lookup(DefaultRoot, os.Getpid(), "PATH", "CARAVAN_PROCENV_TEST")
	must.NoError(t, err)
	must.Eq(t, os.Getenv("PATH"), got["PATH"])
	must.MapNotContainsKey(t, got, "CARAVAN_PROCENV_TEST")
}

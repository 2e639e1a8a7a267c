package driver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// outsideTree is a directory outside the task, with a file, that a test
// checks is left alone.
func outsideTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(dir, "host-file"), []byte("not the task's"), 0o600))
	return dir
}

func mustUntouched(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	must.NoError(t, err)
	must.SliceLen(t, 1, ents, must.Sprint("the directory outside the task changed"))
	b, err := os.ReadFile(filepath.Join(dir, "host-file"))
	must.NoError(t, err)
	must.Eq(t, "not the task's", string(b))
}

// TestDriver_SymlinkedCheckpointDirIsNotFollowed: a task that replaced its
// checkpoint directory with a symlink (left there for its next start) gets a
// fresh directory; the link's target is neither emptied nor chowned. Before
// the fix the driver, as root, emptied the link's target.
func TestDriver_SymlinkedCheckpointDirIsNotFollowed(t *testing.T) {
	for _, withCheckpoint := range []bool{false, true} {
		name := map[bool]string{false: "fresh start", true: "restore"}[withCheckpoint]
		t.Run(name, func(t *testing.T) {
			storeDir := t.TempDir()
			td := newTestDriver(t, storeDir)
			if withCheckpoint {
				src := t.TempDir()
				must.NoError(t, os.WriteFile(filepath.Join(src, "caravan-checkpoint.json"), []byte(`{"sequence": 1}`), 0o644))
				_, _, err := openStore(t, storeDir).Commit(t.Context(), testKey, src, "n", nil)
				must.NoError(t, err)
			}
			cfg := newTask(t, td, "client1", &TaskConfig{
				Command: "/bin/sh", Args: []string{"-c", "echo ready; exec sleep 600"}, Checkpoint: defaultCheckpoint(),
			})
			outside := outsideTree(t)
			dir := filepath.Join(cfg.TaskDir().LocalDir, checkpointDirName)
			must.NoError(t, os.Symlink(outside, dir))

			_, _, err := td.StartTask(cfg)
			must.NoError(t, err)
			mustUntouched(t, outside)
			fi, err := os.Lstat(dir)
			must.NoError(t, err)
			must.True(t, fi.IsDir(), must.Sprint("the checkpoint dir is a real directory again"))
			must.NoError(t, td.DestroyTask(cfg.ID, true))
		})
	}
}

// TestDriver_SpecialMarkerDoesNotBlockStop: a marker that is a FIFO (which
// blocked `nomad job stop` for minutes), a symlink to a host file (whose
// bytes leaked into an event) or a huge file is refused unread, and the
// stop ends within its kill timeout.
func TestDriver_SpecialMarkerDoesNotBlockStop(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	must.NoError(t, os.WriteFile(secret, []byte(`{"sequence": 99, "meta": {"k": "HOST-SECRET"}}`), 0o600))
	cases := map[string]string{
		"fifo":    `mkfifo "$CARAVAN_CHECKPOINT_DIR/caravan-checkpoint.json"`,
		"symlink": `ln -s ` + secret + ` "$CARAVAN_CHECKPOINT_DIR/caravan-checkpoint.json"`,
		"huge":    `truncate -s 256M "$CARAVAN_CHECKPOINT_DIR/caravan-checkpoint.json"`,
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			td := newTestDriver(t, t.TempDir())
			cfg := newTask(t, td, "client1", &TaskConfig{
				Command:    "/bin/sh",
				Args:       []string{"-c", "trap '' USR1; " + script + "; echo ready; exec sleep 600"},
				Checkpoint: defaultCheckpoint(),
			})
			_, _, err := td.StartTask(cfg)
			must.NoError(t, err)
			waitStdout(t, cfg, "ready")
			done := make(chan error, 1)
			go func() { done <- td.StopTask(cfg.ID, 2*time.Second, "SIGTERM") }()
			select {
			case err := <-done:
				must.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("StopTask blocked on the marker")
			}
			ev := td.waitEvent(t, "Checkpoint failed (stop)")
			must.StrNotContains(t, ev.Message, "HOST-SECRET")
		})
	}
}

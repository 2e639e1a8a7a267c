package driver

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/driver/store"
)

// TestDriver_RoleCommitHardening: what a container writes into the shared
// checkpoint directory (as host root under rootful docker and podman)
// cannot reach outside it through the commit task: a symlink out, a
// symlinked, FIFO or huge marker and a FIFO are refused with a failed
// checkpoint event and nothing committed; a symlinked checkpoint directory
// is not followed; a hard link to a file outside is stored as a copy and
// restored as one. The outside tree is left as it was every time.
func TestDriver_RoleCommitHardening(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir, outside string)
		want  string // event substring; "" = committed
	}{
		{"symlink out of the checkpoint", func(t *testing.T, dir, outside string) {
			must.NoError(t, os.Symlink(filepath.Join(outside, "host-file"), filepath.Join(dir, "state.bin")))
			writeSeq(t, dir, 1)
		}, "symlink"},
		{"fifo", func(t *testing.T, dir, _ string) {
			must.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
			writeSeq(t, dir, 1)
		}, "Checkpoint failed (exit)"},
		{"fifo marker", func(t *testing.T, dir, _ string) {
			must.NoError(t, syscall.Mkfifo(filepath.Join(dir, protocol.MarkerName), 0o644))
		}, "not a regular file"},
		{"symlinked marker", func(t *testing.T, dir, outside string) {
			must.NoError(t, os.WriteFile(filepath.Join(outside, "m.json"), []byte(`{"sequence": 9}`), 0o644))
			must.NoError(t, os.Symlink(filepath.Join(outside, "m.json"), filepath.Join(dir, protocol.MarkerName)))
		}, "not a regular file"},
		{"huge marker", func(t *testing.T, dir, _ string) {
			f, err := os.Create(filepath.Join(dir, protocol.MarkerName))
			must.NoError(t, err)
			must.NoError(t, f.Truncate(256<<20))
			must.NoError(t, f.Close())
		}, "too large"},
		{"symlinked checkpoint dir", func(t *testing.T, dir, outside string) {
			writeSeq(t, outside, 1)
			must.NoError(t, os.RemoveAll(dir))
			must.NoError(t, os.Symlink(outside, dir))
		}, "Checkpoint failed (exit)"},
		{"hard link out of the checkpoint", func(t *testing.T, dir, outside string) {
			must.NoError(t, os.Link(filepath.Join(outside, "host-file"), filepath.Join(dir, "state.bin")))
			writeSeq(t, dir, 1)
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			storeDir := t.TempDir()
			td := newTestDriver(t, storeDir)
			restore, dir := startRestored(t, td, "client1")
			// "Outside" is elsewhere in the allocation directory, as a
			// container would see it (it cannot see the host's tree).
			outside := filepath.Join(restore.TaskDir().SharedAllocDir, "outside")
			must.NoError(t, os.Mkdir(outside, 0o755))
			must.NoError(t, os.WriteFile(filepath.Join(outside, "host-file"), []byte("not the task's"), 0o600))
			c.setup(t, dir, outside)
			before := treeOf(t, outside)

			commit := sameAllocTask(t, restore, "commit", roleTask(RoleCommit))
			start := time.Now()
			_, _, err := td.StartTask(commit)
			must.Less(t, 30*time.Second, time.Since(start), must.Sprint("the commit hung"))
			must.Eq(t, before, treeOf(t, outside))
			if c.want != "" {
				must.Error(t, err)
				ev := td.waitEvent(t, "Checkpoint failed (exit)")
				must.StrContains(t, ev.Message+" "+err.Error(), c.want)
				_, err = openStore(t, storeDir).Latest(roleKey)
				must.ErrorIs(t, err, store.ErrNoCheckpoint, must.Sprint("something was committed"))
				return
			}
			must.NoError(t, err)
			td.waitEvent(t, "Checkpoint saved (exit): generation 1")
			restore2 := newTask(t, td, "client2", roleTask(RoleRestore))
			_, _, err = td.StartTask(restore2)
			must.NoError(t, err)
			got := filepath.Join(restore2.TaskDir().SharedAllocDir, "checkpoint", "state.bin")
			b, err := os.ReadFile(got)
			must.NoError(t, err)
			must.Eq(t, "not the task's", string(b))
			must.NoError(t, os.WriteFile(got, []byte("changed"), 0o644))
			must.Eq(t, before, treeOf(t, outside), must.Sprint("the restored copy is linked to the outside file"))
		})
	}
}

func writeSeq(t *testing.T, dir string, seq uint64) {
	t.Helper()
	must.NoError(t, protocol.WriteMarker(dir, &protocol.Marker{Sequence: seq}))
}

// treeOf is every regular file's content below dir, by relative path.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	must.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	}))
	return out
}

// TestSidecarRequestDoesNotFollowLinks: the sidecar (host root) writes its
// request file through the checkpoint directory's os.Root: a request file
// the container made a symlink to a host file is replaced, a symlinked
// checkpoint directory becomes a real one, and the link targets are left
// as they were.
func TestSidecarRequestDoesNotFollowLinks(t *testing.T) {
	for _, name := range []string{"request file", "checkpoint dir"} {
		t.Run(name, func(t *testing.T) {
			alloc, outside := t.TempDir(), t.TempDir()
			must.NoError(t, os.WriteFile(filepath.Join(outside, "host-file"), []byte("not the task's"), 0o600))
			dir := filepath.Join(alloc, "checkpoint")
			if name == "request file" {
				must.NoError(t, os.Mkdir(dir, 0o755))
				must.NoError(t, os.Symlink(filepath.Join(outside, "host-file"), filepath.Join(dir, protocol.RequestName)))
			} else {
				must.NoError(t, os.Symlink(outside, dir))
			}
			before := treeOf(t, outside)
			cd, err := newCkptDir(alloc, dir)
			must.NoError(t, err)
			s := &sidecar{cd: cd}
			must.NoError(t, s.request(nil))
			must.NoError(t, s.request(nil))
			must.Eq(t, before, treeOf(t, outside))
			fi, err := os.Lstat(dir)
			must.NoError(t, err)
			must.True(t, fi.IsDir())
			r, err := protocol.ReadRequest(dir)
			must.NoError(t, err)
			must.Eq(t, uint64(2), r.Sequence)
		})
	}
}

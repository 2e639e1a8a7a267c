package ckptcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
)

var (
	allocKey = store.Key{Namespace: "default", Job: "train", Group: "g", Task: "t", Index: 1, Incarnation: "12"}
	groupKey = store.Key{Namespace: "default", Job: "dp", Group: "worker", Task: "t", Shared: true, Incarnation: "40"}
	namedKey = store.Key{Namespace: "default", Job: "resnet", Group: "g", Task: "t"}
)

// fixture is a store with two generations of allocKey and one each of
// groupKey and namedKey.
func fixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	s, err := store.Open(root, store.Options{ChunkSize: 4096})
	must.NoError(t, err)
	src := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(src, "state"), bytes.Repeat([]byte("x"), 3000), 0o644))
	commits := []struct {
		key  store.Key
		step string
	}{{allocKey, "100"}, {allocKey, "200"}, {groupKey, "7"}, {namedKey, "1"}}
	for i, c := range commits {
		meta := map[string]string{store.MetaStep: c.step, store.MetaSequence: "1", "loss": "0.5", "reason": "stop"}
		meta[store.MetaSequence] = string(rune('1' + i))
		_, _, err := s.Commit(context.Background(), c.key, src, "client1", meta)
		must.NoError(t, err)
	}
	return root
}

func run(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(args, &out, &errOut, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

func TestRun(t *testing.T) {
	root := fixture(t)
	notAStore := t.TempDir()
	cases := []struct {
		name     string
		env      map[string]string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		{"list", nil, []string{"list", "-store", root}, 0,
			[]string{"KEY", "default/dp@40/worker/t/group  1 (1)", "default/train@12/g/t/1", "2 (1..2)", "200", "2.9 KiB", "client1", "default/resnet/g/t/0"}, ""},
		{"list from the environment", map[string]string{EnvStore: root}, []string{"list"}, 0, []string{"default/train@12/g/t/1"}, ""},
		{"show", nil, []string{"show", "-store", root, "default/train@12/g/t/1"}, 0,
			[]string{"key default/train@12/g/t/1", "GENERATION", "100", "200", "loss=0.5 reason=stop"}, ""},
		{"show unknown key", nil, []string{"show", "-store", root, "default/train@13/g/t/1"}, 1, nil, "no checkpoint for default/train@13/g/t/1"},
		{"show malformed key", nil, []string{"show", "-store", root, "default/train/g/t"}, 1, nil, "5 parts"},
		{"show without key", nil, []string{"show", "-store", root}, 2, nil, "exactly one KEY"},
		{"delete unknown key", nil, []string{"delete", "-store", root, "default/train@13/g/t/1"}, 1, nil, "nothing deleted"},
		{"delete bad slot", nil, []string{"delete", "-store", root, "default/train@12/g/t/x"}, 1, nil, "slot"},
		{"delete unknown generation", nil, []string{"delete", "-store", root, "-generation", "7", "default/train@12/g/t/1"}, 1, nil,
			"-generation: no checkpoint: default/train@12/g/t/1 has no generation 7 (it has [1 2]); nothing deleted"},
		{"delete generation 0", nil, []string{"delete", "-store", root, "-generation", "0", "default/train@12/g/t/1"}, 1, nil, "has no generation 0"},
		{"delete bad generation", nil, []string{"delete", "-store", root, "-generation", "-1", "default/train@12/g/t/1"}, 2, nil, "-generation"},
		{"delete generation of unknown key", nil, []string{"delete", "-store", root, "-generation", "1", "default/train@13/g/t/1"}, 1, nil, "nothing deleted"},
		{"delete two keys", nil, []string{"delete", "-store", root, "default/resnet/g/t/0", "default/dp@40/worker/t/group"}, 2, nil, "exactly one KEY"},
		{"no store", nil, []string{"list"}, 2, nil, "-store: no store given"},
		{"not a store", nil, []string{"list", "-store", notAStore}, 1, nil, "not a caravan checkpoint store"},
		{"missing store", nil, []string{"list", "-store", filepath.Join(notAStore, "nope")}, 1, nil, "not a caravan checkpoint store"},
		{"unknown command", nil, []string{"purge"}, 2, nil, `unknown command "purge"`},
		{"no command", nil, nil, 2, nil, "usage: caravan checkpoint"},
		{"bad flag", nil, []string{"list", "-nope"}, 2, nil, "-nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tree(t, root)
			code, out, errOut := run(t, tc.env, tc.args...)
			must.Eq(t, tc.wantCode, code, must.Sprintf("stdout %q stderr %q", out, errOut))
			for _, w := range tc.wantOut {
				must.StrContains(t, out, w)
			}
			if tc.wantErr != "" {
				must.StrContains(t, errOut, tc.wantErr)
			}
			must.Eq(t, before, tree(t, root), must.Sprint("the store changed"))
			ents, err := os.ReadDir(notAStore)
			must.NoError(t, err)
			must.SliceEmpty(t, ents, must.Sprint("a directory that is not a store was written to"))
		})
	}
}

func TestRunListJSON(t *testing.T) {
	root := fixture(t)
	code, out, errOut := run(t, nil, "list", "-store", root, "-json")
	must.Zero(t, code, must.Sprint(errOut))
	var rows []keyRow
	must.NoError(t, json.Unmarshal([]byte(out), &rows))
	must.Len(t, 3, rows)
	must.Eq(t, "default/train@12/g/t/1", rows[2].Key)
	must.Eq(t, []uint64{1, 2}, rows[2].Generations)
	must.Eq(t, "200", rows[2].Step)
}

func TestRunDelete(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"delete", nil, "chunks are freed by the next garbage collection"},
		{"delete and gc", []string{"-gc"}, "unreferenced chunks freed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := fixture(t)
			args := append(append([]string{"delete", "-store", root}, tc.args...), "default/train@12/g/t/1")
			code, out, errOut := run(t, nil, args...)
			must.Zero(t, code, must.Sprint(errOut))
			must.StrContains(t, out, "deleted default/train@12/g/t/1: 2 generation(s)")
			must.StrContains(t, out, tc.want)
			_, out, _ = run(t, nil, "list", "-store", root)
			must.StrNotContains(t, out, "default/train@12")
			must.StrContains(t, out, "default/dp@40/worker/t/group")
			must.StrContains(t, out, "default/resnet/g/t/0")
			// Deleting it again is an error that deletes nothing.
			before := tree(t, root)
			code, _, errOut = run(t, nil, "delete", "-store", root, "default/train@12/g/t/1")
			must.Eq(t, 1, code)
			must.StrContains(t, errOut, "no checkpoint for default/train@12/g/t/1")
			must.Eq(t, before, tree(t, root))
		})
	}
}

// TestRunDeleteGeneration: a generation whose step holds every later
// commit back as stale (an older driver let task meta set it) is dropped
// with delete -generation; the generation before becomes the newest and the
// key's real checkpoints are committed again.
func TestRunDeleteGeneration(t *testing.T) {
	for _, gc := range []bool{false, true} {
		t.Run(map[bool]string{false: "keep chunks", true: "gc"}[gc], func(t *testing.T) {
			root := fixture(t)
			s, err := store.Open(root, store.Options{ChunkSize: 4096})
			must.NoError(t, err)
			src := t.TempDir()
			must.NoError(t, os.WriteFile(filepath.Join(src, "state"), []byte("poisoned"), 0o644))
			ctx := context.Background()
			_, _, err = s.Commit(ctx, allocKey, src, "client2", map[string]string{store.MetaStep: "9007199254740991", store.MetaSequence: "5"})
			must.NoError(t, err)
			real := map[string]string{store.MetaStep: "300", store.MetaSequence: "6"}
			_, _, err = s.Commit(ctx, allocKey, src, "client1", real)
			must.ErrorIs(t, err, store.ErrStale)

			args := []string{"delete", "-store", root, "-generation", "3", allocKey.String()}
			if gc {
				args = append(args[:1], append([]string{"-gc"}, args[1:]...)...)
			}
			code, out, errOut := run(t, nil, args...)
			must.Zero(t, code, must.Sprint(errOut))
			must.StrContains(t, out, "deleted default/train@12/g/t/1 generation 3")
			must.StrContains(t, out, "newest is now generation 2 (step 200, sequence 2)")
			_, out, _ = run(t, nil, "show", "-store", root, allocKey.String())
			must.StrNotContains(t, out, "9007199254740991")

			_, _, err = s.Commit(ctx, allocKey, src, "client1", real)
			must.NoError(t, err)
			_, out, _ = run(t, nil, "list", "-store", root)
			must.StrContains(t, out, "300")

			// The key's last generations, one by one: the key goes.
			for _, g := range []string{"1", "2"} {
				code, _, errOut = run(t, nil, "delete", "-store", root, "-generation", g, allocKey.String())
				must.Zero(t, code, must.Sprint(errOut))
			}
			code, out, errOut = run(t, nil, "delete", "-store", root, "-generation", "3", allocKey.String())
			must.Zero(t, code, must.Sprint(errOut))
			must.StrContains(t, out, "the key is gone")
			_, out, _ = run(t, nil, "list", "-store", root)
			must.StrNotContains(t, out, "default/train@12")
		})
	}
}

// TestRunShowQuotesTaskMeta: meta a task wrote is shown quoted when it
// holds control characters or spaces, so it cannot send escape sequences to
// the operator's terminal or forge columns.
func TestRunShowQuotesTaskMeta(t *testing.T) {
	root := t.TempDir()
	s, err := store.Open(root, store.Options{ChunkSize: 4096})
	must.NoError(t, err)
	src := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(src, "state"), []byte("x"), 0o644))
	_, _, err = s.Commit(context.Background(), namedKey, src, "client1", map[string]string{
		store.MetaSequence: "1", "loss": "\x1b[2J\x1b[31mowned", "note": "a b", "k\nx": "v",
	})
	must.NoError(t, err)
	code, out, errOut := run(t, nil, "show", "-store", root, namedKey.String())
	must.Zero(t, code, must.Sprint(errOut))
	must.StrNotContains(t, out, "\x1b")
	must.StrContains(t, out, `loss="\x1b[2J\x1b[31mowned"`)
	must.StrContains(t, out, `note="a b"`)
	must.StrContains(t, out, `"k\nx"=v`)
}

// TestRunDeleteBusy holds the key's lock as a commit does: delete refuses
// and deletes nothing.
func TestRunDeleteBusy(t *testing.T) {
	root := fixture(t)
	dir := filepath.Join(root, filepath.FromSlash(groupKey.String()))
	unlock := holdLock(t, filepath.Join(dir, "lock"))
	defer unlock()
	before := tree(t, root)
	code, _, errOut := run(t, nil, "delete", "-store", root, groupKey.String())
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "checkpoint key in use")
	must.StrContains(t, errOut, "nothing deleted")
	must.Eq(t, before, tree(t, root))

	code, _, errOut = run(t, nil, "delete", "-store", root, "-generation", "1", groupKey.String())
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "checkpoint key in use")
	must.Eq(t, before, tree(t, root))
}

// tree lists every path and size below root.
func tree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	must.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(p)
		if !d.IsDir() {
			b.WriteString(" " + string(rune('0'+info.Size()%10)))
		}
		b.WriteByte('\n')
		return nil
	}))
	return b.String()
}

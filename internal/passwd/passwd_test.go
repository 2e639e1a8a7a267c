package passwd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(root, "etc/passwd"), []byte(
		"root:x:0:0:root:/root:/bin/sh\n# a comment\n\nnobody:x:65534:65534:nobody:/:/sbin/nologin\ntrainer:x:1000:1001::/home/trainer:/bin/sh\nbroken:x:abc:1\n"), 0o644))
	must.NoError(t, os.WriteFile(filepath.Join(root, "etc/group"), []byte(
		"root:x:0:\nstaff:x:50:\ntrainer:x:1001:\n"), 0o644))
	return root
}

func TestLookup(t *testing.T) {
	root := fakeRoot(t)
	cases := []struct {
		spec string
		want IDs
	}{
		{"root", IDs{0, 0}},
		{"nobody", IDs{65534, 65534}},
		{"trainer", IDs{1000, 1001}},
		{"1000", IDs{1000, 1001}},        // numeric, with a passwd entry: its group
		{"4242", IDs{4242, 0}},           // numeric, no entry: gid 0
		{"trainer:staff", IDs{1000, 50}}, // named group
		{"4242:77", IDs{4242, 77}},
		{"65534:65534", IDs{65534, 65534}},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			got, err := Lookup(root, c.spec)
			must.NoError(t, err)
			must.Eq(t, c.want, got)
		})
	}
}

func TestLookup_Errors(t *testing.T) {
	root := fakeRoot(t)
	_, err := Lookup(root, "ghost")
	must.True(t, errors.Is(err, ErrUnknownUser))
	must.StrContains(t, err.Error(), `"ghost"`)
	_, err = Lookup(root, "trainer:nogroup")
	must.True(t, errors.Is(err, ErrUnknownGroup))
	_, err = Lookup(root, "broken")
	must.True(t, errors.Is(err, ErrUnknownUser))
	_, err = Lookup(root, "")
	must.Error(t, err)
	// No passwd file: a name cannot be resolved, a number still can.
	empty := t.TempDir()
	_, err = Lookup(empty, "trainer")
	must.True(t, errors.Is(err, os.ErrNotExist))
	ids, err := Lookup(empty, "123:45")
	must.NoError(t, err)
	must.Eq(t, IDs{123, 45}, ids)
}

func TestLookupHost(t *testing.T) {
	ids, err := LookupHost("root")
	must.NoError(t, err)
	must.Eq(t, IDs{0, 0}, ids)
	ids, err = LookupHost("0:5")
	must.NoError(t, err)
	must.Eq(t, IDs{0, 5}, ids)
	ids, err = LookupHost("54321")
	must.NoError(t, err)
	must.Eq(t, 54321, ids.UID)
	_, err = LookupHost("no-such-user-caravan")
	must.True(t, errors.Is(err, ErrUnknownUser))
}

// TestLookupIn_MapFiles: files read out of an image resolve as a directory
// does, and errors name where the files came from.
func TestLookupIn_MapFiles(t *testing.T) {
	img := MapFiles{Label: "image app:1", Files: map[string][]byte{
		"etc/passwd": []byte("root:x:0:0::/root:/bin/sh\ntrainer:x:4242:4343::/home/trainer:/bin/sh\n"),
		"etc/group":  []byte("root:x:0:\ntrainers:x:4343:\nvideo:x:44:\n"),
	}}
	cases := []struct {
		spec string
		want IDs
	}{
		{"trainer", IDs{4242, 4343}},
		{"4242", IDs{4242, 4343}},
		{"trainer:video", IDs{4242, 44}},
		{"65534", IDs{65534, 0}},
		{"65534:65534", IDs{65534, 65534}},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			got, err := LookupIn(img, c.spec)
			must.NoError(t, err)
			must.Eq(t, c.want, got)
		})
	}
	_, err := LookupIn(img, "ghost")
	must.ErrorIs(t, err, ErrUnknownUser)
	must.StrContains(t, err.Error(), `user "ghost": no such user in image app:1 /etc/passwd`)
	_, err = LookupIn(img, "trainer:nogroup")
	must.ErrorIs(t, err, ErrUnknownGroup)
	must.StrContains(t, err.Error(), "image app:1 /etc/group")

	// An image without the files (FROM scratch): numbers only.
	bare := MapFiles{Label: "image scratch:1"}
	ids, err := LookupIn(bare, "65534")
	must.NoError(t, err)
	must.Eq(t, IDs{65534, 0}, ids)
	_, err = LookupIn(bare, "trainer")
	must.ErrorIs(t, err, os.ErrNotExist)
	must.StrContains(t, err.Error(), "image scratch:1 /etc/passwd")
}

func TestNeedsFiles(t *testing.T) {
	for spec, want := range map[string]bool{
		"65534:65534": false, "0:0": false, "65534": true, "trainer": true, "trainer:5": true, "5:staff": true,
	} {
		must.Eq(t, want, NeedsFiles(spec), must.Sprint(spec))
	}
}

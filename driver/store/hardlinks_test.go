package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/shoenig/test/must"
)

// TestCommitRefusesForeignHardLink: a hard link in the checkpoint directory
// to a file its owner does not own is refused with ErrHardLink naming the
// file, and nothing is published. Where fs.protected_hardlinks=0 a task
// could link a file it cannot read; the test presents the linked file as
// owned by another user through statOf, the seam that reads owners, because
// protected_hardlinks is machine-wide. Hard links between the owner's own
// files, and other users' files with one link, are stored as before.
func TestCommitRefusesForeignHardLink(t *testing.T) {
	cases := []struct {
		name    string
		foreign string // file presented as owned by uid 4242
		links   int    // extra hard links made to it
		refused bool
	}{
		{"foreign file hard-linked", "secret", 1, true},
		{"foreign file twice linked", "secret", 2, true},
		{"own file hard-linked", "", 1, false},
		{"foreign file with one link", "secret", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, Options{})
			key := testKey("hardlink")
			src := t.TempDir()
			writeTree(t, src, 1)
			secret := filepath.Join(src, "secret")
			must.NoError(t, os.WriteFile(secret, []byte("not yours"), 0o600))
			for i := 0; i < tc.links; i++ {
				must.NoError(t, os.Link(secret, filepath.Join(src, "shards", "copy"+string(rune('0'+i)))))
			}
			if tc.foreign != "" {
				fi, err := os.Lstat(secret)
				must.NoError(t, err)
				foreignAs(t, fi, 4242)
			}
			_, _, err := s.Commit(context.Background(), key, src, "n1", nil)
			if !tc.refused {
				must.NoError(t, err)
				return
			}
			must.ErrorIs(t, err, ErrHardLink)
			must.ErrorIs(t, err, ErrInvalid)
			must.StrContains(t, err.Error(), "uid 4242")
			must.RegexMatch(t, regexp.MustCompile(`(secret|shards/copy0) has \d links`), err.Error())
			_, err = s.Latest(key)
			must.ErrorIs(t, err, ErrNoCheckpoint)
		})
	}
}

// foreignAs makes statOf present the file fi as owned by uid for the rest
// of the test.
func foreignAs(t *testing.T, fi fs.FileInfo, uid uint32) {
	t.Helper()
	want, ok := statOf(fi)
	must.True(t, ok)
	real := statOf
	statOf = func(fi fs.FileInfo) (fileStat, bool) {
		st, ok := real(fi)
		if ok && st.id == want.id {
			st.uid = uid
		}
		return st, ok
	}
	t.Cleanup(func() { statOf = real })
}

// TestCommitRefusesForeignHardLinkAsRoot is the same without the seam, where
// the test runs as root (root may link any file whatever
// protected_hardlinks says): the checkpoint directory belongs to uid 4242,
// the linked file to root.
func TestCommitRefusesForeignHardLinkAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own files as two users")
	}
	s := openTestStore(t, Options{})
	key := testKey("hardlink-root")
	base := t.TempDir()
	secret := filepath.Join(base, "shadow")
	must.NoError(t, os.WriteFile(secret, []byte("root only"), 0o600))
	src := filepath.Join(base, "ckpt")
	must.NoError(t, os.Mkdir(src, 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(src, "mine"), []byte("mine"), 0o644))
	must.NoError(t, os.Chown(filepath.Join(src, "mine"), 4242, 4242))
	must.NoError(t, os.Link(filepath.Join(src, "mine"), filepath.Join(src, "mine2")))
	must.NoError(t, os.Chown(src, 4242, 4242))
	_, _, err := s.Commit(context.Background(), key, src, "n1", nil)
	must.NoError(t, err, must.Sprint("hard links between the owner's own files are stored"))

	must.NoError(t, os.Link(secret, filepath.Join(src, "stolen")))
	_, _, err = s.Commit(context.Background(), key, src, "n1", nil)
	must.ErrorIs(t, err, ErrHardLink)
	must.StrContains(t, err.Error(), "stolen")
	ms, err := s.List(key)
	must.NoError(t, err)
	must.Len(t, 1, ms)
}

// TestCommitReadsOnlyTheScannedFile: a file swapped for another (such as a
// hard link to a file the task does not own) between the scan and the read
// is refused, not read.
func TestCommitReadsOnlyTheScannedFile(t *testing.T) {
	src := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("scanned"), 0o644))
	must.NoError(t, os.WriteFile(filepath.Join(src, "other"), []byte("swapped in"), 0o644))
	root, err := os.OpenRoot(src)
	must.NoError(t, err)
	defer root.Close()
	files, err := ScanTree(root)
	must.NoError(t, err)
	must.Eq(t, "a", files[0].Path)

	sf, err := openShared(root, &files[0], 1)
	must.NoError(t, err)
	sf.done()

	must.NoError(t, os.Rename(filepath.Join(src, "other"), filepath.Join(src, "a")))
	_, err = openShared(root, &files[0], 1)
	must.ErrorContains(t, err, "changed while committing")
	must.False(t, errors.Is(err, syscall.ENOENT))
}

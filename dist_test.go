package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/internal/version"
)

// fakeReport is a THIRD_PARTY_LICENSES as tools/licences writes it.
const fakeReport = "Third-party licences of caravan\n\nEvery module linked into this binary\n\n" +
	"MODULE                          VERSION   LICENCE\n" +
	"github.com/hashicorp/go-plugin  v1.4.10   MPL-2.0\n" +
	"std                             go1.26.8  BSD-3-Clause\n"

// fakeDist writes build/dist as scripts/dist.sh lays it out (without
// building anything), leaving out the files in skip.
func fakeDist(t *testing.T, skip ...string) string {
	return fakeDistWith(t, fakeReport, skip...)
}

// fakeDistWith is fakeDist with the given THIRD_PARTY_LICENSES.
func fakeDistWith(t *testing.T, report string, skip ...string) string {
	t.Helper()
	dir := t.TempDir()
	var sums strings.Builder
	for _, arch := range []string{"amd64", "arm64"} {
		top := fmt.Sprintf("caravan-%s-linux-%s", version.Version, arch)
		name := fmt.Sprintf("caravan_%s_linux_%s.tar.gz", version.Version, arch)
		f, err := os.Create(filepath.Join(dir, name))
		must.NoError(t, err)
		gz := gzip.NewWriter(f)
		tw := tar.NewWriter(gz)
		files := map[string]string{
			"caravan": "binary", "LICENSE": "MPL", "README.md": "readme", "CHANGELOG.md": "changes",
			"BUILD-INFO":           "version: " + version.Version + "\n",
			"THIRD_PARTY_LICENSES": report,
			"jobspecs/README.md":   "index", "jobspecs/agent/client-plugins.hcl": "plugin {}",
		}
		for path, body := range files {
			if slices.Contains(skip, path) {
				continue
			}
			must.NoError(t, tw.WriteHeader(&tar.Header{Name: top + "/" + path, Mode: 0o644, Size: int64(len(body))}))
			_, err := tw.Write([]byte(body))
			must.NoError(t, err)
		}
		must.NoError(t, tw.Close())
		must.NoError(t, gz.Close())
		must.NoError(t, f.Close())
		b, err := os.ReadFile(filepath.Join(dir, name))
		must.NoError(t, err)
		fmt.Fprintf(&sums, "%x  %s\n", sha256.Sum256(b), name)
	}
	must.NoError(t, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums.String()), 0o644))
	return dir
}

func distCheck(t *testing.T, dir string) (string, error) {
	t.Helper()
	cmd := exec.Command("scripts/dist.sh", "--check")
	cmd.Env = append(os.Environ(), "DIST_DIR="+dir, "VERSION="+version.Version)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDistCheck exercises `make dist-check` (scripts/dist.sh --check) on a
// layout built here, so `make test` checks the checker without the
// minutes a real cross build takes.
func TestDistCheck(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	out, err := distCheck(t, fakeDist(t))
	must.NoError(t, err, must.Sprint(out))
	must.StrContains(t, out, "verified (2 tarballs, SHA256SUMS)")

	out, err = distCheck(t, fakeDist(t, "LICENSE"))
	must.Error(t, err)
	must.StrContains(t, out, "/LICENSE")

	out, err = distCheck(t, fakeDist(t, "THIRD_PARTY_LICENSES"))
	must.Error(t, err)
	must.StrContains(t, out, "/THIRD_PARTY_LICENSES")

	out, err = distCheck(t, fakeDistWith(t, "some other file\n"))
	must.Error(t, err)
	must.StrContains(t, out, "THIRD_PARTY_LICENSES is not the licence report of caravan")

	out, err = distCheck(t, fakeDistWith(t, "Third-party licences of caravan\n\nMODULE  VERSION  LICENCE\n"))
	must.Error(t, err)
	must.StrContains(t, out, "THIRD_PARTY_LICENSES lists no module")

	dir := fakeDist(t)
	tgz := filepath.Join(dir, fmt.Sprintf("caravan_%s_linux_arm64.tar.gz", version.Version))
	must.NoError(t, os.WriteFile(tgz, []byte("tampered"), 0o644))
	out, err = distCheck(t, dir)
	must.Error(t, err)
	must.StrContains(t, out, "checksums do not match")
}

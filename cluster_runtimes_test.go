package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

var runrootLine = regexp.MustCompile(`(?m)^runroot = "([^"]*)"$`)

// podmanRunroot writes the podman configuration of a cluster at dir with
// scripts/cluster/runtimes.sh's write_podman_conf and returns the runroot
// in its storage.conf.
func podmanRunroot(t *testing.T, dir string) string {
	t.Helper()
	root, err := filepath.Abs(".")
	must.NoError(t, err)
	script := `set -euo pipefail; source "$root/scripts/cluster/runtimes.sh"; write_podman_conf; cat "$rt_dir/podman/storage.conf"`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "root="+root, "dir="+dir, "runtimes=none")
	out, err := cmd.CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	m := runrootLine.FindStringSubmatch(string(out))
	must.SliceLen(t, 2, m, must.Sprintf("no runroot in storage.conf:\n%s", out))
	t.Cleanup(func() { _ = os.RemoveAll(m[1]) })
	return m[1]
}

// TestClusterRuntimes_PodmanRunrootIsShort: podman refuses a --runroot
// longer than 50 characters, and the cleanup conmon runs when a container
// exits (`podman container cleanup --runroot ...`) passes the service's, so
// a long one left every exited container "stopped" and each wait on it
// hung for 20 s. Under a deep cluster dir the runroot stays short, and two
// cluster dirs get two runroots.
func TestClusterRuntimes_PodmanRunrootIsShort(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 60), "build", "cluster-mine")
	other := filepath.Join(t.TempDir(), "cluster-other")
	a, b := podmanRunroot(t, deep), podmanRunroot(t, other)
	must.LessEq(t, 50, len(a), must.Sprintf("runroot %q", a))
	must.LessEq(t, 50, len(b), must.Sprintf("runroot %q", b))
	must.NotEq(t, a, b, must.Sprint("two clusters share a podman runroot"))
	must.Eq(t, a, podmanRunroot(t, deep), must.Sprint("a cluster's runroot changes between runs"))
}

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

// runtimesScript runs script after sourcing scripts/cluster/runtimes.sh for
// a two-client cluster at a temporary dir, with a PATH that holds the tools
// the script uses and, of the runtimes, only stubs of those named.
func runtimesScript(t *testing.T, runtimes string, stubs []string, script string) (string, error) {
	t.Helper()
	root, err := filepath.Abs(".")
	must.NoError(t, err)
	bin := t.TempDir()
	for _, tool := range []string{"sed", "cat", "sha256sum", "cut"} {
		p, err := exec.LookPath(tool)
		must.NoError(t, err)
		must.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	for _, s := range stubs {
		must.NoError(t, os.WriteFile(filepath.Join(bin, s), []byte("#!/bin/sh\n"), 0o755))
	}
	full := `set -euo pipefail; log() { echo "log: $*"; }; clients=(client1 client2); ` +
		`source "$root/scripts/cluster/runtimes.sh"; ` + script
	cmd := exec.Command("/bin/bash", "-c", full)
	cmd.Env = []string{"PATH=" + bin, "root=" + root, "dir=" + t.TempDir(), "runtimes=" + runtimes}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestClusterRuntimes_OneDockerDriverPerRuntime: with dockerd, podman and
// runc present, every client runs Nomad's docker driver (a client has one),
// client1's against the cluster's dockerd and client2's against podman's
// Docker-compatible API, and its node meta names that runtime; no podman
// driver plugin is configured. Without podman CARAVAN_RUNTIMES=auto turns
// the docker driver off with a line saying what is missing and what
// installs it, and CARAVAN_RUNTIMES=all fails.
func TestClusterRuntimes_OneDockerDriverPerRuntime(t *testing.T) {
	all := []string{"dockerd", "podman", "runc"}
	const show = `check_runtimes; echo "denylist: $(denylist)"; echo "docker: $docker_sock podman: $podman_sock"; ` +
		`for n in client1 client2; do echo "== $n runtime=$(runtime_of $n)"; render_runtimes $n; done; ` +
		`runtime_used podman && echo "podman used"; runtime_used docker && echo "docker used"; true`

	out, err := runtimesScript(t, "all", all, show)
	must.NoError(t, err, must.Sprint(out))
	socks := regexp.MustCompile(`docker: (\S+) podman: (\S+)`).FindStringSubmatch(out)
	must.SliceLen(t, 3, socks, must.Sprint(out))
	must.StrContains(t, out, "denylist: qemu,java\n")
	must.StrContains(t, out, "== client1 runtime=docker\n")
	must.StrContains(t, out, "== client2 runtime=podman\n")
	client1, client2, ok := strings.Cut(out[strings.Index(out, "== client1"):], "== client2")
	must.True(t, ok, must.Sprint(out))
	must.StrContains(t, client1, "plugin \"docker\" {\n  config {\n    endpoint = \"unix://"+socks[1]+"\"")
	must.StrContains(t, client2, "plugin \"docker\" {\n  config {\n    endpoint = \"unix://"+socks[2]+"\"")
	must.StrContains(t, client2, `nvidia_runtime = "runc"`)
	must.StrNotContains(t, out, "nomad-driver-podman")
	must.StrContains(t, out, "podman used\ndocker used\n")

	out, err = runtimesScript(t, "auto", []string{"dockerd", "runc"}, show)
	must.NoError(t, err, must.Sprint(out))
	must.StrContains(t, out, "denylist: docker,qemu,java\n")
	must.StrContains(t, out, "missing: podman (make e2e-deps)")
	must.StrContains(t, out, "== client2 runtime=none\n")
	must.StrNotContains(t, out, "plugin \"")

	out, err = runtimesScript(t, "all", []string{"dockerd", "runc"}, show)
	must.Error(t, err, must.Sprint(out))
	must.StrContains(t, out, "CARAVAN_RUNTIMES=all, but missing: podman (make e2e-deps)")
}

// TestClusterRuntimes_DriverNamesItsEngine: each client's caravan driver
// names the engine its docker driver talks to (docker_endpoint), which the
// restore role asks for a container's user; without runtimes, none.
func TestClusterRuntimes_DriverNamesItsEngine(t *testing.T) {
	const show = `echo "docker: $docker_sock podman: $podman_sock"; for n in client1 client2; do echo "== $n"; render_engine $n; done`
	out, err := runtimesScript(t, "all", []string{"dockerd", "podman", "runc"}, show)
	must.NoError(t, err, must.Sprint(out))
	socks := regexp.MustCompile(`docker: (\S+) podman: (\S+)`).FindStringSubmatch(out)
	must.SliceLen(t, 3, socks, must.Sprint(out))
	must.StrContains(t, out, "== client1\n    docker_endpoint = \"unix://"+socks[1]+"\"\n")
	must.StrContains(t, out, "== client2\n    docker_endpoint = \"unix://"+socks[2]+"\"\n")

	out, err = runtimesScript(t, "none", nil, show)
	must.NoError(t, err, must.Sprint(out))
	must.StrNotContains(t, out, "docker_endpoint")
}

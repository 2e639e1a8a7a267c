package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// clusterScript runs scripts/cluster.sh with a scratch cluster dir and the
// given environment, and returns its exit code and stderr.
func clusterScript(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join("scripts", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), append([]string{"CARAVAN_CLUSTER_DIR=" + dir, "CARAVAN_PORT_BASE=19800",
		"CARAVAN_RUNTIMES=none"}, env...)...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		must.NoError(t, err)
	}
	return code, errOut.String(), dir
}

// TestClusterScript_S3NeedsWeed: CARAVAN_STORE=s3 without the SeaweedFS
// binary fails at once, naming the make target, and starts nothing (the S3
// e2e tests then fail instead of skipping).
func TestClusterScript_S3NeedsWeed(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "seaweedfs")
	code, errOut, dir := clusterScript(t, []string{"CARAVAN_STORE=s3", "CARAVAN_WEED=" + missing}, "up")
	must.Eq(t, 1, code, must.Sprint(errOut))
	must.StrContains(t, errOut, missing)
	must.StrContains(t, errOut, "make seaweedfs")
	pids, _ := filepath.Glob(filepath.Join(dir, "pids", "*"))
	must.SliceEmpty(t, pids)
}

// TestClusterScript_BadStore: an unknown CARAVAN_STORE is refused by name.
func TestClusterScript_BadStore(t *testing.T) {
	code, errOut, _ := clusterScript(t, []string{"CARAVAN_STORE=nfs"}, "status")
	must.Eq(t, 2, code)
	must.StrContains(t, errOut, "CARAVAN_STORE must be posix or s3, got 'nfs'")
}

// TestClusterScript_BadFaultProxy: CARAVAN_S3_FAULT_PROXY other than 0 or
// 1 is refused by name.
func TestClusterScript_BadFaultProxy(t *testing.T) {
	code, errOut, _ := clusterScript(t, []string{"CARAVAN_S3_FAULT_PROXY=yes"}, "status")
	must.Eq(t, 2, code)
	must.StrContains(t, errOut, "CARAVAN_S3_FAULT_PROXY must be 0 or 1, got 'yes'")
}

// TestClusterScript_S3StartNeedsAnS3Cluster: s3-start on a cluster dir
// that was not started with the S3 store says so.
func TestClusterScript_S3StartNeedsAnS3Cluster(t *testing.T) {
	code, errOut, _ := clusterScript(t, nil, "s3-start")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "was not started with CARAVAN_STORE=s3")
}

// TestClusterScript_BadAgentBin: a NOMAD_BIN or CONSUL_BIN that is not an
// executable file is refused by name before anything starts.
func TestClusterScript_BadAgentBin(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nomad")
	nomad := filepath.Join(t.TempDir(), "nomad")
	must.NoError(t, os.WriteFile(nomad, []byte("#!/bin/sh\necho Nomad v1.6.3\n"), 0o755))
	broken := filepath.Join(t.TempDir(), "consul")
	must.NoError(t, os.WriteFile(broken, []byte("#!/bin/sh\nexit 3\n"), 0o755))
	notFile := t.TempDir()
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"NOMAD_BIN=" + missing}, "cluster: NOMAD_BIN=" + missing + " is not an executable file"},
		{[]string{"NOMAD_BIN=" + nomad, "CONSUL_BIN=" + notFile}, "cluster: CONSUL_BIN=" + notFile + " is not an executable file"},
		{[]string{"NOMAD_BIN=" + nomad, "CONSUL_BIN=" + broken}, "cluster: '" + broken + " version' failed: not a working consul binary (CONSUL_BIN)"},
	} {
		code, errOut, dir := clusterScript(t, tc.env, "up")
		must.Eq(t, 1, code, must.Sprint(errOut))
		must.StrContains(t, errOut, tc.want)
		pids, _ := filepath.Glob(filepath.Join(dir, "pids", "*"))
		must.SliceEmpty(t, pids)
	}
}

// agentCopy copies the newest build/bin/<name>-<prefix>* agent into dir (a
// path of the operator's own, not build/bin) and returns its path; it skips
// the test when there is none.
func agentCopy(t *testing.T, dir, name, prefix string) string {
	t.Helper()
	builds, _ := filepath.Glob(filepath.Join("build", "bin", name+"-"+prefix+"*"))
	if len(builds) == 0 {
		t.Skipf("no build/bin/%s-%s*: make %s", name, prefix, name)
	}
	b, err := os.ReadFile(builds[len(builds)-1])
	must.NoError(t, err)
	p := filepath.Join(dir, name)
	must.NoError(t, os.WriteFile(p, b, 0o755))
	return p
}

// TestClusterScript_AgentBins: NOMAD_BIN and CONSUL_BIN, pointed at copies
// of the built Nomad v1.6 and Consul v1.14 agents (standing in for agents
// an operator already has), start a one-client cluster whose processes run
// those copies, not build/bin's, and `down` leaves no cgroup of it behind.
// Skipped in -short mode and without the builds and build/caravan.
// CARAVAN_PORT_BASE picks its ports (default 19800).
func TestClusterScript_AgentBins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster (-short)")
	}
	if _, err := os.Stat(filepath.Join("build", "caravan")); err != nil {
		t.Skip("no build/caravan: make dev")
	}
	own := t.TempDir()
	nomad, consul := agentCopy(t, own, "nomad", "v1.6."), agentCopy(t, own, "consul", "v1.14.")
	base := os.Getenv("CARAVAN_PORT_BASE")
	if base == "" {
		base = "19800"
	}
	dir := filepath.Join(t.TempDir(), "cluster")
	run := func(arg string) string {
		cmd := exec.Command(filepath.Join("scripts", "cluster.sh"), arg)
		cmd.Env = append(os.Environ(), "CARAVAN_CLUSTER_DIR="+dir, "CARAVAN_PORT_BASE="+base, "CARAVAN_RUNTIMES=none",
			"CARAVAN_CLIENTS=1", "NOMAD_BIN="+nomad, "CONSUL_BIN="+consul)
		out, err := cmd.CombinedOutput()
		must.NoError(t, err, must.Sprintf("cluster.sh %s: %s", arg, out))
		return string(out)
	}
	t.Cleanup(func() { run("down") })
	out := run("up")
	must.StrContains(t, out, "agents: Nomad v1.6.")
	must.StrContains(t, out, "("+nomad+")")
	must.StrContains(t, out, "Consul v1.14.")
	for agent, want := range map[string]string{"consul": consul, "server": nomad, "client1": nomad} {
		pid, err := os.ReadFile(filepath.Join(dir, "pids", agent+".pid"))
		must.NoError(t, err)
		exe, err := os.Readlink(filepath.Join("/proc", strings.TrimSpace(string(pid)), "exe"))
		must.NoError(t, err)
		must.Eq(t, want, exe, must.Sprintf("the %s agent's executable", agent))
	}
	// down removes the client's parent cgroup (and Nomad's cpuset children).
	run("down")
	left, _ := filepath.Glob("/sys/fs/cgroup/*/caravan-" + base + "-client1")
	must.SliceEmpty(t, left, must.Sprint("cgroups left behind by down"))
}

// TestClusterScript_EnvPutsAgentsOnPath: after `eval "$(scripts/cluster.sh
// env)"`, `nomad` and `consul` are the cluster's binaries (build/bin, or
// NOMAD_BIN's and CONSUL_BIN's directories), and evaluating it twice adds
// nothing more to PATH.
func TestClusterScript_EnvPutsAgentsOnPath(t *testing.T) {
	bins := t.TempDir()
	for _, name := range []string{"nomad", "consul"} {
		must.NoError(t, os.WriteFile(filepath.Join(bins, name), []byte("#!/bin/sh\n"), 0o755))
	}
	script := `eval "$(scripts/cluster.sh env)"; first=$PATH; eval "$(scripts/cluster.sh env)"; ` +
		`[ "$PATH" = "$first" ] || { echo "PATH grew: $first -> $PATH"; exit 1; }; command -v nomad; command -v consul`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "CARAVAN_CLUSTER_DIR="+t.TempDir(), "CARAVAN_PORT_BASE=19800",
		"NOMAD_BIN="+filepath.Join(bins, "nomad"), "CONSUL_BIN="+filepath.Join(bins, "consul"))
	out, err := cmd.CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	must.Eq(t, filepath.Join(bins, "nomad")+"\n"+filepath.Join(bins, "consul")+"\n", string(out))

	cmd = exec.Command("bash", "-c", `eval "$(scripts/cluster.sh env)"; echo "$PATH"`)
	cmd.Env = append(os.Environ(), "CARAVAN_CLUSTER_DIR="+t.TempDir(), "CARAVAN_PORT_BASE=19800", "NOMAD_BIN=", "CONSUL_BIN=")
	out, err = cmd.CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	root, err := os.Getwd()
	must.NoError(t, err)
	must.StrHasPrefix(t, filepath.Join(root, "build", "bin")+":", string(out))
}

// TestClusterScript_ImagesNeedRuntimes: loading a user's image into a
// cluster whose runtimes do not run fails, saying how to start them,
// rather than doing nothing.
func TestClusterScript_ImagesNeedRuntimes(t *testing.T) {
	code, errOut, _ := clusterScript(t, nil, "images", "my-trainer.tar")
	must.Eq(t, 1, code, must.Sprint(errOut))
	must.StrContains(t, errOut, "scripts/cluster.sh up")
}

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

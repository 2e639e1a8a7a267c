package driver

import (
	"strings"
	"testing"
)

// FuzzTaskConfig: a task config is refused with an error naming its field,
// or is valid by every rule StartTask relies on; never a panic.
func FuzzTaskConfig(f *testing.F) {
	f.Add("/bin/true", "", 0, "SIGUSR1", "10m", "5m", "fail")
	f.Add("x", "rel", -1, "SIGKILL", "-1s", "0", "maybe")
	f.Add("x", "/w", 1001, "SIGTERM", "1ns", "1h", "start_fresh")
	f.Fuzz(func(t *testing.T, command, workDir string, oom int, signal, interval, timeout, onErr string) {
		tc := &TaskConfig{Command: command, WorkDir: workDir, OOMScoreAdj: oom, Checkpoint: &CheckpointConfig{
			Signal: signal, Interval: interval, Timeout: timeout, OnRestoreError: onErr,
		}}
		if err := tc.validate(); err != nil {
			return
		}
		c := tc.Checkpoint
		if tc.Command == "" || oom < 0 || oom > 1000 || c.timeout <= 0 || (c.interval != 0 && c.interval < minInterval) ||
			c.Signal == "SIGKILL" || c.Signal == "SIGSTOP" {
			t.Fatalf("accepted %+v %+v", tc, c)
		}
	})
}

// FuzzPluginConfig: as FuzzTaskConfig, for the plugin block.
func FuzzPluginConfig(f *testing.F) {
	f.Add("/mnt/ckpt", 3, 0, "10m", "0,10-20")
	f.Add("rel", 0, 1, "-1s", "20-10")
	f.Fuzz(func(t *testing.T, storeDir string, retain, chunk int, gc, ids string) {
		c := &Config{CheckpointStore: storeDir, CheckpointRetain: retain, CheckpointChunkSize: chunk, CheckpointGCInterval: gc,
			DeniedHostUids: ids}
		if err := c.validate(); err != nil {
			return
		}
		if retain < 1 || (chunk != 0 && (chunk < minChunkSize || chunk > maxChunkSize)) || c.gcInterval < 0 {
			t.Fatalf("accepted %+v", c)
		}
		if strings.TrimSpace(ids) != "" && len(c.deniedUIDs) != strings.Count(ids, ",")+1 {
			t.Fatalf("denied_host_uids %q parsed as %v", ids, c.deniedUIDs)
		}
		for _, r := range c.deniedUIDs {
			if r.lo > r.hi {
				t.Fatalf("denied_host_uids %q gave the empty range %v", ids, r)
			}
		}
	})
}

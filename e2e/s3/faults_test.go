package s3

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
	"github.com/caravan-nomad/caravan/internal/s3fault"
)

// faultAgent starts a standalone agent whose driver plugin reaches the
// cluster's S3 server through a fault-injecting proxy (in this test's
// process), under a prefix of its own.
func faultAgent(t *testing.T, c *harness.C, s harness.S3, name string, slot int) (*harness.Agent, *s3fault.Proxy) {
	t.Helper()
	return storeAgent(t, c, s, name, slot, s.Prefix+"-"+name, s.CredentialsFile)
}

// storeAgent is faultAgent with the store's prefix and credentials file
// given.
func storeAgent(t *testing.T, c *harness.C, s harness.S3, name string, slot int, prefix, credentials string) (*harness.Agent, *s3fault.Proxy) {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	must.NoError(t, err)
	p := s3fault.New(target, hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Debug, Output: testWriter{t}}))
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	t.Cleanup(p.Clear) // first: no request stays held

	a := harness.NewAgent(t, c, name, slot)
	a.Start(t, a.PluginConfig(harness.OneSimulatedGPU, fmt.Sprintf(`enabled           = true
checkpoint_retain = 3
store {
  endpoint         = %q
  tls              = false
  bucket           = %q
  prefix           = %q
  region           = %q
  path_style       = true
  credentials_file = %q
}`, front.Listener.Addr().String(), s.Bucket, prefix, s.Region, credentials)))
	a.WaitNode(t, 2*time.Minute)
	return a, p
}

// testWriter sends the proxy's log to the test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(b, "\n")))
	return len(b), nil
}

// agentPlugin finds the caravan driver plugin process the agent started.
func agentPlugin(t *testing.T, a *harness.Agent) int {
	t.Helper()
	want := filepath.Join(a.Dir, "plugins", "caravan") + "\x00driver\x00"
	mark := []byte("CARAVAN_AGENT_MARK=" + a.Dir + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil || string(cmd) != want {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		if err != nil || !bytes.Contains(env, mark) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		must.NoError(t, err)
		return pid
	}
	t.Fatalf("no caravan driver plugin of agent %s", a.Name)
	return 0
}

func signal(t *testing.T, c *harness.C, allocID string) {
	t.Helper()
	harness.Eventually(t, time.Minute, func() error {
		_, err := c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", allocID, trainTask)
		return err
	})
}

// TestS3_PluginKilledMidUpload kills the driver plugin with SIGKILL while
// it uploads a checkpoint (the proxy holds the upload): the task survives,
// the relaunched plugin commits the next checkpoint, a migration restores
// it, and the run ends bit for bit.
func TestS3_PluginKilledMidUpload(t *testing.T) {
	c, s := s3Cluster(t)
	want := harness.TrainerReference(t, c.Bin, steps)
	a, p := faultAgent(t, c, s, "s3kill", 0)
	runTrainer(t, a.C, "job_type=service", "hold=true")
	a1 := a.C.WaitRunning(t, trainJob, trainTask, nil)

	p.Inject(s3fault.Fault{Kind: s3fault.Delay, Match: s3fault.Uploads, Delay: time.Hour})
	signal(t, a.C, a1.ID)
	harness.Eventually(t, time.Minute, func() error {
		if p.Injected(s3fault.Delay) == 0 {
			return fmt.Errorf("no upload has reached the proxy (%d requests)", p.Requests())
		}
		return nil
	})
	old := agentPlugin(t, a)
	must.NoError(t, syscall.Kill(old, syscall.SIGKILL))
	p.Clear()
	must.Nil(t, a.C.DriverEvent(t, a1.ID, trainTask, "Checkpoint saved"), must.Sprint("the held upload was committed"))

	// The agent relaunches the plugin, which recovers the task; the next
	// checkpoint goes through.
	signal(t, a.C, a1.ID)
	saved := a.C.WaitDriverEvent(t, a1.ID, trainTask, "Checkpoint saved (on demand)")
	must.NotEq(t, old, agentPlugin(t, a))

	// A replacement restores from S3 what the new plugin committed (or the
	// newer checkpoint on stop).
	_, err := a.C.CLI(t, "alloc", "stop", "-detach", a1.ID)
	must.NoError(t, err)
	stopped := a.C.WaitDriverEvent(t, a1.ID, trainTask, "Checkpoint saved (stop)")
	a2 := a.C.WaitRunning(t, trainJob, trainTask, map[string]bool{a1.ID: true})
	restored := a.C.WaitDriverEvent(t, a2.ID, trainTask, "Checkpoint restored")
	must.Eq(t, stopped.Details["generation"], restored.Details["generation"])
	must.GreaterEq(t, mustInt(t, saved.Details["generation"]), mustInt(t, restored.Details["generation"]))
	a.C.WaitTrainerFinal(t, a2.ID, steps, want, true)
}

func mustInt(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	must.NoError(t, err, must.Sprintf("%q", s))
	return n
}

// TestS3_ServerStoppedDuringCommit stops the S3 server while the driver
// commits the checkpoint on stop (the proxy slows the upload so the stop
// lands inside it): the allocation still stops within its kill_timeout,
// the event says the checkpoint failed and which generation is kept, and
// once the server is back the kept generation restores and the next commit
// works; the run ends bit for bit.
func TestS3_ServerStoppedDuringCommit(t *testing.T) {
	c, s := s3Cluster(t)
	want := harness.TrainerReference(t, c.Bin, steps)
	a, p := faultAgent(t, c, s, "s3down", 1)
	runTrainer(t, a.C, "job_type=service", "hold=true")
	a1 := a.C.WaitRunning(t, trainJob, trainTask, nil)

	signal(t, a.C, a1.ID)
	first := a.C.WaitDriverEvent(t, a1.ID, trainTask, "Checkpoint saved (on demand)")

	// Suspend (no replacement while the server is down), with the upload
	// of the stop's checkpoint held, then stop the server under it: the
	// held upload goes on after 8s, when the server (SIGTERM, SIGKILL
	// after 5s) is gone.
	p.Inject(s3fault.Fault{Kind: s3fault.Delay, Match: s3fault.Uploads, Delay: 8 * time.Second})
	held := p.Injected(s3fault.Delay)
	stopAt := time.Now()
	_, err := a.C.CLI(t, "job", "scale", "-detach", trainJob, "train", "0")
	must.NoError(t, err)
	harness.Eventually(t, time.Minute, func() error {
		if p.Injected(s3fault.Delay) == held {
			return fmt.Errorf("the stop's checkpoint has not started uploading")
		}
		return nil
	})
	c.StopS3(t)
	t.Cleanup(func() { c.StartS3(t) }) // the next test needs it, whatever happens here
	p.Clear()

	failed := a.C.WaitDriverEvent(t, a1.ID, trainTask, "Checkpoint failed (stop)")
	a.C.WaitTerminal(t, a1.ID, 2*time.Minute)
	took := time.Since(stopAt)
	t.Logf("stop with the server down: %s; event: %s", took.Round(time.Millisecond), failed.DriverMessage)
	// kill_timeout is 30s in the jobspec; allow for the agent's own steps.
	must.Less(t, 60*time.Second, took, must.Sprint("the stop was not bounded by kill_timeout"))
	must.StrContains(t, failed.DriverMessage, "generation "+first.Details["generation"]+" kept")
	must.Nil(t, a.C.DriverEvent(t, a1.ID, trainTask, "Checkpoint saved (stop)"))

	// The server is back: the kept generation restores, the next commit
	// works.
	c.StartS3(t)
	_, err = a.C.CLI(t, "job", "scale", "-detach", trainJob, "train", "1")
	must.NoError(t, err)
	a2 := a.C.WaitRunning(t, trainJob, trainTask, map[string]bool{a1.ID: true})
	restored := a.C.WaitDriverEvent(t, a2.ID, trainTask, "Checkpoint restored")
	must.Eq(t, first.Details["generation"], restored.Details["generation"])
	must.StrContains(t, a.C.Logs(t, a2.ID, trainTask, "stdout"), "resumed step="+first.Details["step"])
	signal(t, a.C, a2.ID)
	next := a.C.WaitDriverEvent(t, a2.ID, trainTask, "Checkpoint saved (on demand)")
	must.Greater(t, mustInt(t, first.Details["generation"]), mustInt(t, next.Details["generation"]))
	a.C.WaitTrainerFinal(t, a2.ID, steps, want, true)
}

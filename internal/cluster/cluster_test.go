package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

func TestPoll(t *testing.T) {
	ctx := context.Background()
	t.Run("holds on the third call", func(t *testing.T) {
		calls := 0
		err := Poll(ctx, time.Millisecond, time.Minute, func() error {
			if calls++; calls < 3 {
				return fmt.Errorf("call %d", calls)
			}
			return nil
		})
		must.NoError(t, err)
		must.Eq(t, 3, calls)
	})
	t.Run("deadline: the last error", func(t *testing.T) {
		calls := 0
		err := Poll(ctx, time.Millisecond, 20*time.Millisecond, func() error {
			calls++
			return fmt.Errorf("call %d", calls)
		})
		must.ErrorIs(t, err, ErrTimeout)
		var te *TimeoutError
		must.True(t, errors.As(err, &te))
		must.EqError(t, te.Last, fmt.Sprintf("call %d", calls))
		must.EqError(t, err, fmt.Sprintf("still failing after 20ms: call %d", calls))
	})
	t.Run("context ends first", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := Poll(cctx, time.Millisecond, time.Minute, func() error { return errors.New("never") })
		must.ErrorIs(t, err, context.Canceled)
		must.False(t, errors.Is(err, ErrTimeout))
	})
}

// TestWait_NamesWhatItAwaited: Wait's timeout names what was awaited and
// the condition's last error (none when it just did not hold).
func TestWait_NamesWhatItAwaited(t *testing.T) {
	c := &Cluster{Config: Config{PollEvery: time.Millisecond}}
	err := c.Wait(context.Background(), "the thing", 10*time.Millisecond, func() (bool, error) { return false, nil })
	must.EqError(t, err, "timed out after 10ms waiting for the thing (last error: <nil>)")
	err = c.Wait(context.Background(), "the thing", 10*time.Millisecond, func() (bool, error) { return false, errors.New("boom") })
	must.EqError(t, err, "timed out after 10ms waiting for the thing (last error: boom)")
}

// TestAllocs_CurrentRegistration: a job submitted again under its ID lists
// only its own allocations; with no job registered, all are listed.
func TestAllocs_CurrentRegistration(t *testing.T) {
	f := newFakeNomad()
	f.jobs["a"] = &nomadapi.Job{ID: ptr("a"), CreateIndex: ptr(uint64(100))}
	f.stubs["a"] = []*nomadapi.AllocationListStub{{ID: "old", CreateIndex: 40}, {ID: "new", CreateIndex: 101}}
	f.stubs["gone"] = []*nomadapi.AllocationListStub{{ID: "x", CreateIndex: 3}}
	c := f.serve(t, nil)
	as, err := c.Allocs(context.Background(), "a")
	must.NoError(t, err)
	must.SliceLen(t, 1, as)
	must.Eq(t, "new", as[0].ID)
	as, err = c.Allocs(context.Background(), "gone")
	must.NoError(t, err)
	must.SliceLen(t, 1, as)
}

func TestWaitRunning(t *testing.T) {
	f := newFakeNomad()
	f.jobs["a"] = &nomadapi.Job{ID: ptr("a")}
	f.stubs["a"] = []*nomadapi.AllocationListStub{
		{ID: "first-alloc", CreateIndex: 5, ClientStatus: "running", NodeName: "client1", DesiredStatus: "run"},
		{ID: "failed-alloc", CreateIndex: 7, ClientStatus: "failed", NodeName: "client1", DesiredStatus: "run"},
		{ID: "second-alloc", CreateIndex: 9, ClientStatus: "running", NodeName: "client2", DesiredStatus: "run"},
	}
	c := f.serve(t, nil)
	running, err := c.WaitRunning(context.Background(), "a", 2, time.Minute)
	must.NoError(t, err)
	must.Eq(t, []string{"second-alloc", "first-alloc"}, []string{running[0].ID, running[1].ID})

	_, err = c.WaitRunning(context.Background(), "a", 3, 30*time.Millisecond)
	must.ErrorIs(t, err, ErrTimeout)
	must.StrContains(t, err.Error(), "allocations of a: second-a on client2: run/running; failed-a on client1: run/failed; first-al on client1: run/running")
}

func TestWaitAllocStatus(t *testing.T) {
	f := newFakeNomad()
	f.allocs["a1"] = &nomadapi.Allocation{ID: "a1", ClientStatus: "pending"}
	c := f.serve(t, nil)
	a, err := c.WaitAllocStatus(context.Background(), "a1", time.Minute, "complete", "failed")
	must.NoError(t, err)
	must.Eq(t, "complete", a.ClientStatus)
	_, err = c.WaitAllocStatus(context.Background(), "a1", 20*time.Millisecond, "running")
	must.ErrorIs(t, err, ErrTimeout)
	must.StrContains(t, err.Error(), "allocation a1 is complete (want running)")
}

// TestStop: the job is stopped, its allocations awaited, then it is
// purged; an unknown job is no error; a failed purge is ErrPurge; a job
// whose allocations keep running is a timeout, not purged.
func TestStop(t *testing.T) {
	running := func() []*nomadapi.AllocationListStub {
		return []*nomadapi.AllocationListStub{{ID: "a1", ClientStatus: "running"}}
	}
	t.Run("stops, waits, purges", func(t *testing.T) {
		f := newFakeNomad()
		f.jobs["a"], f.stubs["a"], f.stopAfter = &nomadapi.Job{ID: ptr("a")}, running(), 2
		c := f.serve(t, nil)
		must.NoError(t, c.Stop(context.Background(), "a", time.Minute))
		reqs := f.sent()
		must.Eq(t, "DELETE /v1/job/a?purge=false", reqs[0])
		must.Eq(t, "DELETE /v1/job/a?purge=true", reqs[len(reqs)-1])
		must.SliceLen(t, 5, reqs) // stop, 3 listings (2 still running, then none), purge
		_, ok := f.jobs["a"]
		must.False(t, ok)
	})
	t.Run("unknown job", func(t *testing.T) {
		f := newFakeNomad()
		must.NoError(t, f.serve(t, nil).Stop(context.Background(), "nope", time.Minute))
	})
	t.Run("purge fails", func(t *testing.T) {
		f := newFakeNomad()
		f.jobs["a"], f.stubs["a"], f.purgeStatus = &nomadapi.Job{ID: ptr("a")}, running(), http.StatusInternalServerError
		err := f.serve(t, nil).Stop(context.Background(), "a", time.Minute)
		must.ErrorIs(t, err, ErrPurge)
	})
	t.Run("still running", func(t *testing.T) {
		f := newFakeNomad()
		f.jobs["a"], f.stubs["a"], f.stopAfter = &nomadapi.Job{ID: ptr("a")}, running(), 1<<30
		err := f.serve(t, nil).Stop(context.Background(), "a", 30*time.Millisecond)
		must.ErrorIs(t, err, ErrTimeout)
		must.False(t, errors.Is(err, ErrPurge))
		must.StrContains(t, err.Error(), "1 allocations still running (a1 on : /running)")
		must.NotEq(t, "DELETE /v1/job/a?purge=true", f.sent()[len(f.sent())-1])
	})
}

// TestPurge purges the known jobs of the list, and waits until none runs.
func TestPurge(t *testing.T) {
	f := newFakeNomad()
	f.jobs["a"] = &nomadapi.Job{ID: ptr("a")}
	f.stubs["a"] = []*nomadapi.AllocationListStub{{ID: "a1", ClientStatus: "running"}}
	f.stopAfter = 1
	c := f.serve(t, nil)
	purged, err := c.Purge(context.Background(), "a", "unknown")
	must.NoError(t, err)
	must.Eq(t, []string{"a"}, purged)
	must.SliceContains(t, f.sent(), "DELETE /v1/job/a?purge=true")
	must.SliceNotContains(t, f.sent(), "DELETE /v1/job/unknown?purge=true")
	must.Eq(t, "complete", f.stubs["a"][0].ClientStatus)
}

func TestScale(t *testing.T) {
	f := newFakeNomad()
	c := f.serve(t, nil)
	must.NoError(t, c.Scale(context.Background(), "a", "worker", 3, "more", map[string]any{"source": "test"}))
	must.Eq(t, int64(3), *f.scaled.Count)
	must.Eq(t, "more", f.scaled.Message)
	must.Eq(t, "worker", f.scaled.Target["Group"])
	must.Eq(t, "test", f.scaled.Meta["source"])
}

func TestNodeName_ShortIDWhenUnknown(t *testing.T) {
	c := newFakeNomad().serve(t, nil)
	must.Eq(t, "0123abcd", c.NodeName(context.Background(), "0123abcd-4567"))
}

// TestPlannerAddr: the healthy instance of a running allocation of the
// planner job, not one a stopped allocation left in Consul.
func TestPlannerAddr(t *testing.T) {
	f := newFakeNomad()
	f.jobs[PlannerJob] = &nomadapi.Job{ID: ptr(PlannerJob)}
	f.stubs[PlannerJob] = []*nomadapi.AllocationListStub{
		{ID: "stopped-alloc", CreateIndex: 1, ClientStatus: "complete", DesiredStatus: "stop"},
		{ID: "running-alloc", CreateIndex: 2, ClientStatus: "running", DesiredStatus: "run"},
	}
	entries := `[{"Service":{"ID":"_nomad-task-stopped-alloc-planner","Address":"127.0.0.1","Port":1111}},
		{"Service":{"ID":"_nomad-task-running-alloc-planner","Address":"127.0.0.1","Port":2222}}]`
	consul := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/health/service/"+PlannerService || r.URL.Query().Get("passing") == "" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusNotFound)
			return
		}
		fmt.Fprint(w, entries)
	})
	c := f.serve(t, consul)
	addr, err := c.PlannerAddr(context.Background())
	must.NoError(t, err)
	must.Eq(t, "127.0.0.1:2222", addr)

	f.stubs[PlannerJob] = f.stubs[PlannerJob][:1]
	_, err = c.PlannerAddr(context.Background())
	must.ErrorIs(t, err, ErrNoPlanner)
}

func TestEvents(t *testing.T) {
	a := &nomadapi.Allocation{TaskStates: map[string]*nomadapi.TaskState{"t": {Events: []*nomadapi.TaskEvent{
		{Type: "Started"}, {Type: "Driver", DisplayMessage: "Checkpoint saved (exit)"}, {Type: "Checkpoint saved"},
	}}}}
	must.SliceLen(t, 2, Events(a, "t", "Checkpoint saved"))
	must.SliceLen(t, 0, Events(a, "other", "Checkpoint saved"))
}

// fakeCLI writes a Nomad CLI that logs its arguments and environment to
// a file and answers as the script says, and returns a Cluster using it.
func fakeCLI(t *testing.T, script string) (*Cluster, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	bin := filepath.Join(dir, "nomad")
	body := "#!/bin/sh\necho \"$* | $NOMAD_ADDR | $NOMAD_TOKEN | $CONSUL_HTTP_ADDR | $(pwd)\" >> " + log + "\n" + script
	must.NoError(t, os.WriteFile(bin, []byte(body), 0o755))
	return &Cluster{Config: Config{Root: dir, NomadBin: bin, NomadAddr: "http://127.0.0.1:1", ConsulAddr: "http://127.0.0.1:2",
		Token: "secret"}}, log
}

func calls(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	must.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestSubmit renders the jobspec for its ID, then runs it detached, with
// the vars, the cluster's addresses and token, in Root.
func TestSubmit(t *testing.T) {
	c, log := fakeCLI(t, `case "$*" in
*-output*) echo '{"Job":{"ID":"rendered"}}' ;;
*-detach*) echo 'Job registration successful' ;;
*) exit 3 ;;
esac`)
	var said []string
	c.Say = func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }
	id, err := c.Submit(context.Background(), "jobspecs/x.nomad.hcl", "a=1", `b=["x", "y"]`)
	must.NoError(t, err)
	must.Eq(t, "rendered", id)
	spec := filepath.Join(c.Root, "jobspecs/x.nomad.hcl")
	rest := " | http://127.0.0.1:1 | secret | 127.0.0.1:2 | " + c.Root
	must.Eq(t, []string{
		"job run -output -var a=1 -var b=[\"x\", \"y\"] " + spec + rest,
		"job run -detach -var a=1 -var b=[\"x\", \"y\"] " + spec + rest,
	}, calls(t, log))
	must.Eq(t, []string{"nomad job run jobspecs/x.nomad.hcl  (job rendered)"}, said)
}

func TestSubmit_Errors(t *testing.T) {
	cases := []struct {
		name, script, want string
	}{
		{"render fails", `echo 'Error parsing job file'; exit 1`, "rendering jobspecs/x.nomad.hcl: nomad job run -output"},
		{"no JSON", `echo 'not json'`, "rendering jobspecs/x.nomad.hcl: reading the CLI's job"},
		{"no ID", `echo '{"Job":{}}'`, "rendering jobspecs/x.nomad.hcl: the job has no ID"},
		{"register fails", `case "$*" in *-output*) echo '{"Job":{"ID":"j"}}' ;; *) echo 'refused'; exit 1 ;; esac`,
			"nomad job run -detach"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := fakeCLI(t, tc.script)
			_, err := c.Submit(context.Background(), "jobspecs/x.nomad.hcl")
			must.ErrorContains(t, err, tc.want)
		})
	}
}

// TestLogs: only Nomad's "not started yet" answer is ErrNotStarted, and
// only its "not found on client" ErrCollected; any other failure of `nomad
// alloc logs` stays a plain error.
func TestLogs(t *testing.T) {
	cases := []struct {
		name, output string
		fails        bool
		want         error
	}{
		{"stdout", "step=1", false, nil},
		{"prestart still running", `Failed to read stdout file: error reading file: Unexpected response code: 404 (task "trainer" not started yet. No logs available)`, true, ErrNotStarted},
		{"collected", `Error reading file: Unexpected response code: 500 (alloc 7d34 not found on client)`, true, ErrCollected},
		{"unknown allocation", `No allocation(s) with prefix or id "x" found`, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := "echo '" + tc.output + "'"
			if tc.fails {
				script += "; exit 1"
			}
			c, log := fakeCLI(t, script)
			out, err := c.Logs(context.Background(), "7d34", "trainer", true)
			must.StrContains(t, calls(t, log)[0], "alloc logs -stderr 7d34 trainer |")
			switch {
			case !tc.fails:
				must.NoError(t, err)
				must.Eq(t, tc.output+"\n", out)
			case tc.want != nil:
				must.ErrorIs(t, err, tc.want)
				must.Eq(t, "", out)
			default:
				must.Error(t, err)
				must.False(t, errors.Is(err, ErrNotStarted) || errors.Is(err, ErrCollected))
			}
		})
	}
}

// TestCLI_ContextEnds: a CLI call the context ends says so (errors.Is).
func TestCLI_ContextEnds(t *testing.T) {
	c, _ := fakeCLI(t, "exit 0")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.CLI(ctx, "status")
	must.ErrorIs(t, err, context.Canceled)
}

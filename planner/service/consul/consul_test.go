package consul

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/internal/fakeconsul"
)

func elector(f *fakeconsul.Server, id string) *Elector {
	return NewElector(ElectorConfig{Client: f.Client(), Key: "caravan/planner/leader", ID: id,
		SessionTTL: 10 * time.Second, Clock: clock.Real{}})
}

func start(t *testing.T, e *Elector) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

func TestElector_OneLeaderAndFailover(t *testing.T) {
	f := fakeconsul.New()
	defer f.Close()
	e1, e2 := elector(f, "one"), elector(f, "two")
	stop1 := start(t, e1)
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(e1.IsLeader), wait.Timeout(5*time.Second), wait.Gap(10*time.Millisecond)))
	stop2 := start(t, e2)
	defer stop2()
	// e2 campaigns but cannot lead while e1 holds the lock.
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return len(f.Sessions()) == 2 }),
		wait.Timeout(5*time.Second), wait.Gap(10*time.Millisecond)))
	must.False(t, e2.IsLeader())
	holder, value := f.Holder("caravan/planner/leader")
	must.NotEq(t, "", holder)
	must.Eq(t, "one", value)
	who, err := e2.Leader(context.Background())
	must.NoError(t, err)
	must.Eq(t, "one", who)

	// e1's process dies: Consul invalidates its session (its health check
	// fails). e2 takes over and e1 notices it lost the lock.
	f.Invalidate(holder)
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(e2.IsLeader), wait.Timeout(5*time.Second), wait.Gap(10*time.Millisecond)))
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return !e1.IsLeader() }), wait.Timeout(5*time.Second), wait.Gap(10*time.Millisecond)))
	_, value = f.Holder("caravan/planner/leader")
	must.Eq(t, "two", value)
	stop1()
	must.True(t, e2.IsLeader())
}

func TestElector_CleanStopReleasesLock(t *testing.T) {
	f := fakeconsul.New()
	defer f.Close()
	e1 := elector(f, "one")
	stop1 := start(t, e1)
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(e1.IsLeader), wait.Timeout(5*time.Second), wait.Gap(10*time.Millisecond)))
	stop1()
	must.False(t, e1.IsLeader())
	holder, _ := f.Holder("caravan/planner/leader")
	must.Eq(t, "", holder)
}

func TestRegister(t *testing.T) {
	f := fakeconsul.New()
	defer f.Close()
	s := Service{Name: "caravan-planner", ID: "p1", Address: "127.0.0.1", Port: 8095, HealthPath: "/v1/health", CheckInterval: 2 * time.Second}
	must.NoError(t, Register(context.Background(), f.Client(), s, clock.Real{}, hclog.NewNullLogger()))
	must.Eq(t, []string{"p1"}, f.Services())
	must.True(t, strings.HasPrefix(s.CheckID(), "service:"))
	must.NoError(t, Deregister(f.Client(), "p1"))
	must.SliceEmpty(t, f.Services())
}

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
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakeconsul"
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
	r := &Registrar{Client: f.Client(), Service: s, Clock: clock.Real{}, Logger: hclog.NewNullLogger()}
	must.NoError(t, r.Ensure(context.Background()))
	must.Eq(t, []string{"p1"}, f.Services())
	must.True(t, strings.HasPrefix(s.CheckID(), "service:"))
	must.NoError(t, Deregister(f.Client(), "p1"))
	must.SliceEmpty(t, f.Services())
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(f), wait.Timeout(10*time.Second), wait.Gap(10*time.Millisecond)), must.Sprint(what))
}

func planner(f *fakeconsul.Server, id string, ttl time.Duration) (*Registrar, *Elector) {
	s := Service{Name: "caravan-planner", ID: id, Address: "127.0.0.1", Port: 8095, HealthPath: "/v1/health", CheckInterval: time.Second}
	r := &Registrar{Client: f.Client(), Service: s, Clock: clock.Real{}, Logger: hclog.NewNullLogger(), Every: 20 * time.Millisecond}
	e := NewElector(ElectorConfig{Client: f.Client(), Key: "caravan/planner/leader", ID: id, CheckID: s.CheckID(),
		SessionTTL: ttl, BeforeSession: r.Ensure, Clock: clock.Real{}})
	return r, e
}

// Consul restarted without its state forgets the service and its check, and
// sessions on that check fail ("Missing check"): the registrar restores the
// registration, and the elector (which ensures it before each session)
// leads again.
func TestElector_LeadsAgainAfterConsulLosesItsState(t *testing.T) {
	f := fakeconsul.New()
	defer f.Close()
	r, e := planner(f, "p1", 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	stop := start(t, e)
	defer stop()
	eventually(t, "first leadership", e.IsLeader)

	f.Wipe()
	must.SliceEmpty(t, f.Services())
	eventually(t, "registered again", func() bool { return len(f.Services()) == 1 })
	eventually(t, "leading again", func() bool {
		holder, value := f.Holder("caravan/planner/leader")
		return e.IsLeader() && holder != "" && value == "p1"
	})
}

// Without the registrar's loop, the elector alone restores what it needs.
func TestElector_EnsuresRegistrationBeforeEachSession(t *testing.T) {
	f := fakeconsul.New()
	defer f.Close()
	_, e := planner(f, "p1", 10*time.Second)
	stop := start(t, e)
	defer stop()
	eventually(t, "first leadership", e.IsLeader)
	f.Wipe()
	eventually(t, "leading again", func() bool {
		holder, _ := f.Holder("caravan/planner/leader")
		return e.IsLeader() && holder != ""
	})
	must.Eq(t, []string{"p1"}, f.Services())
}

// Consul frozen (SIGSTOP): renewals hang. The leader stops leading once its
// session is unconfirmed for a TTL (before Consul, which waits at least a
// TTL after the last renewal, could hand the lock to another), and leads
// again after Consul resumes.
func TestElector_FencedWhileConsulIsFrozen(t *testing.T) {
	f := fakeconsul.New()
	defer f.Close()
	const ttl = 900 * time.Millisecond
	_, e := planner(f, "p1", ttl)
	stop := start(t, e)
	defer stop()
	eventually(t, "first leadership", e.IsLeader)
	lease := e.LeaseUntil()
	must.False(t, lease.IsZero())
	must.LessEq(t, ttl, time.Until(lease))

	frozen := time.Now()
	f.Freeze()
	eventually(t, "fenced", func() bool { return !e.IsLeader() })
	// Not before the lease it had, and within a TTL of the freeze (plus
	// the renewal period that may have just begun).
	must.True(t, !time.Now().Before(lease.Add(-50*time.Millisecond)))
	must.Less(t, ttl+ttl/3+500*time.Millisecond, time.Since(frozen))
	f.Thaw()
	eventually(t, "leading again after the thaw", e.IsLeader)
}

func TestServiceMeta_LinksTheWebPage(t *testing.T) {
	s := Service{Name: "caravan-planner", ID: "p1", Address: "127.0.0.1", Port: 8095}
	must.Eq(t, map[string]string{"caravan_component": "planner"}, s.registration().Meta)
	s.UIPath = "/ui"
	must.Eq(t, "http://127.0.0.1:8095/ui", s.registration().Meta["caravan_ui"])
	s.Address = "::1"
	must.Eq(t, "http://[::1]:8095/ui", s.registration().Meta["caravan_ui"])
}

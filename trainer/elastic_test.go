package trainer

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"
)

// testLocator is a coordinator address the test moves (a migration).
type testLocator struct {
	mu   sync.Mutex
	addr string
}

func (l *testLocator) Coordinator(ctx context.Context) (string, error) {
	for {
		l.mu.Lock()
		a := l.addr
		l.mu.Unlock()
		if a != "" {
			return a, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (l *testLocator) set(a string) {
	l.mu.Lock()
	l.addr = a
	l.mu.Unlock()
}

// elastic runs servers and workers in-process over loopback.
type elastic struct {
	t       testing.TB
	cfg     Config
	loc     *testLocator
	mu      sync.Mutex
	workers []context.CancelFunc
	servers []context.CancelFunc
	wg      sync.WaitGroup
}

func newElastic(t testing.TB, c Config) *elastic {
	e := &elastic{t: t, cfg: c, loc: &testLocator{}}
	t.Cleanup(e.stopAll)
	return e
}

func listen(t testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	return ln
}

// coordinator starts a coordinating server; its result arrives on the channel.
func (e *elastic) coordinator(ctx context.Context, o ServerOptions) <-chan *Result {
	if o.Listener == nil {
		o.Listener = listen(e.t)
	}
	ch := make(chan *Result, 1)
	e.loc.set(o.Listener.Addr().String())
	go func() {
		res, err := RunCoordinator(ctx, e.cfg, o)
		if err != nil {
			e.t.Errorf("coordinator: %v", err)
		}
		ch <- res
	}()
	return ch
}

// scaleWorkers starts or stops (newest first) workers until n run.
func (e *elastic) scaleWorkers(n int) { e.scale(&e.workers, n, e.startWorker) }

// scaleServers does the same for shard servers (the coordinator is one
// more server).
func (e *elastic) scaleServers(n int) { e.scale(&e.servers, n, e.startServer) }

func (e *elastic) scale(group *[]context.CancelFunc, n int, start func(context.Context)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(*group) < n {
		ctx, cancel := context.WithCancel(context.Background())
		*group = append(*group, cancel)
		e.wg.Add(1)
		go func() { defer e.wg.Done(); start(ctx) }()
	}
	for len(*group) > n {
		(*group)[len(*group)-1]()
		*group = (*group)[:len(*group)-1]
	}
}

func (e *elastic) startWorker(ctx context.Context) {
	err := RunWorker(ctx, WorkerOptions{Coordinator: e.loc})
	if err != nil && ctx.Err() == nil {
		e.t.Errorf("worker: %v", err)
	}
}

func (e *elastic) startServer(ctx context.Context) {
	err := RunShardServer(ctx, ServerOptions{Listener: listen(e.t), Coordinator: e.loc})
	if err != nil && ctx.Err() == nil {
		e.t.Errorf("shard server: %v", err)
	}
}

func (e *elastic) stopAll() {
	e.scaleWorkers(0)
	e.scaleServers(0)
	e.wg.Wait()
}

func elasticConfig() Config {
	c := testConfig()
	c.Steps, c.MicroShards = 240, 8
	return c
}

// TestElasticBitExact scales workers 1->3->2->0->2 and servers 1->2->1->3,
// suspends and resumes the coordinator (a migration: workers and shard
// servers follow it), and ends with the parameters of one process.
func TestElasticBitExact(t *testing.T) {
	c := elasticConfig()
	want := uninterrupted(t, c)
	e := newElastic(t, c)
	dir := t.TempDir()

	plan := map[uint64]func(){
		20:  func() { e.scaleWorkers(3) },
		40:  func() { e.scaleServers(1) }, // 2 servers
		60:  func() { e.scaleWorkers(2) },
		80:  func() { e.scaleServers(0) }, // 1 server
		100: func() { e.scaleWorkers(0); time.AfterFunc(50*time.Millisecond, func() { e.scaleWorkers(2) }) },
		130: func() { e.scaleServers(2) }, // 3 servers
	}
	reqs := make(chan Request, 1)
	after := func(step uint64) {
		if f, ok := plan[step]; ok {
			f()
		}
		if step == 160 {
			reqs <- RequestCheckpointAndExit // suspend the coordinator
		}
	}
	e.scaleWorkers(1)
	out := &syncBuffer{}
	first := <-e.coordinator(context.Background(), ServerOptions{Dir: dir, Requests: reqs, AfterStep: after, Out: out})
	must.NotNil(t, first)
	must.True(t, first.Interrupted)
	must.Eq(t, 160, first.Step)

	// Resume: a new coordinator (another address) restores the checkpoint;
	// the running workers and shard servers find it.
	e.loc.set("")
	res := <-e.coordinator(context.Background(), ServerOptions{Dir: dir, Out: out})
	must.NotNil(t, res)
	must.False(t, res.Interrupted)
	must.Eq(t, 160, res.StartStep)
	must.Eq(t, want.Hash, res.Hash)
	for _, line := range []string{"workers=3", "ps=2 epoch", "leaving: taking its slice",
		"ps=1 epoch", "workers=0", "ps=3 epoch", "checkpoint step=160 sequence=1 ps=3"} {
		must.StrContains(t, out.String(), line)
	}
}

// crashedServer joins as a shard server, takes a slice and vanishes
// without handing it off (a kill -9).
func crashedServer(t *testing.T, addr string, vanish <-chan struct{}) {
	ln := listen(t)
	sh := &shard{}
	go acceptLoop(ln, sh.serveData)
	c, cfg, err := hello(context.Background(), addr, &message{Kind: msgHello, Role: roleServer, Addr: ln.Addr().String()})
	must.NoError(t, err)
	go func() {
		for {
			m, err := c.recv()
			if err != nil {
				return
			}
			if m.Kind == msgSetShard {
				sh.set(*cfg, m)
				_ = c.send(&message{Kind: msgAck})
			}
		}
	}()
	<-vanish
	_ = ln.Close()
	c.close()
}

// TestElastic_LostServerReplaysFromCheckpoint: a server that vanishes with
// its slice sends training back to the last checkpoint, and the replay
// ends bit for bit equal.
func TestElastic_LostServerReplaysFromCheckpoint(t *testing.T) {
	c := elasticConfig()
	c.Steps = 80
	want := uninterrupted(t, c)
	e := newElastic(t, c)
	vanish := make(chan struct{})
	var once sync.Once
	reqs := make(chan Request, 1)
	after := func(step uint64) {
		switch step {
		case 30:
			reqs <- RequestCheckpoint
		case 40:
			go crashedServer(t, e.loc.addr, vanish)
		case 50:
			once.Do(func() { close(vanish) }) // step 50 comes again in the replay
		}
	}
	e.scaleWorkers(2)
	out := &syncBuffer{}
	res := <-e.coordinator(context.Background(), ServerOptions{Dir: t.TempDir(), Requests: reqs, AfterStep: after, Out: out})
	must.NotNil(t, res)
	must.StrContains(t, out.String(), "replaying from step=30")
	must.Eq(t, want.Hash, res.Hash)
}

// recorder keeps the progress reports it gets.
type recorder struct {
	mu  sync.Mutex
	got []Progress
}

func (r *recorder) Report(_ context.Context, p Progress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, p)
	return nil
}

// TestElastic_CoordinatorReportsTheJob: one report per job, with the
// whole job's speed and the workers and servers it was measured with.
func TestElastic_CoordinatorReportsTheJob(t *testing.T) {
	c := elasticConfig()
	c.Steps, c.LogEvery = 40, 20
	e := newElastic(t, c)
	e.scaleServers(1)
	e.scaleWorkers(2)
	rec := &recorder{}
	// After the first step the coordinator waits until the server's and
	// both workers' joins are queued: it handles them during the second
	// step, so the report at step 40 counts every member.
	ln := &joinListener{Listener: listen(t)}
	res := <-e.coordinator(context.Background(), ServerOptions{Listener: ln, Reporter: rec, AfterStep: func(step uint64) {
		if step == 1 {
			// On the coordinator's goroutine: an error, not FailNow.
			if err := wait.InitialSuccess(wait.BoolFunc(func() bool { return ln.joinsQueued() == 3 }),
				wait.Timeout(30*time.Second), wait.Gap(time.Millisecond)).Run(); err != nil {
				t.Errorf("joins queued after step 1: %d of 3: %v", ln.joinsQueued(), err)
			}
		}
	}})
	must.NotNil(t, res)
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.got) == 2
	}), wait.Timeout(5*time.Second)))
	last := rec.got[1]
	must.Eq(t, uint64(40), last.Step)
	must.True(t, last.Done)
	must.Eq(t, 2, last.Workers)
	must.Eq(t, 2, last.PS)
	must.Eq(t, c.Batch, last.BatchSize)
	must.Positive(t, last.SamplesPerSec)
	// Gradient statistics from the workers' micro-shards.
	must.Positive(t, last.GradSqr)
	must.Positive(t, last.GradVar)
	must.Positive(t, last.Sample().GradSqr)
}

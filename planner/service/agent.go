package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/version"
	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/config"
	"github.com/caravan-nomad/caravan/planner/service/consul"
	"github.com/caravan-nomad/caravan/planner/service/httpapi"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/manager"
	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/service/submit"
	"github.com/caravan-nomad/caravan/planner/service/ui"
)

// Version is reported by /v1/health: the binary's version, the same
// string `caravan version` prints.
var Version = version.Version

// Agent is one running planner instance.
type Agent struct {
	mu  sync.Mutex
	cfg *config.Config
	log hclog.Logger
	clk clock.Clock

	nomad    *nomadapi.Client
	consul   *consulapi.Client
	source   *source.Source
	store    *ingest.Store
	manager  *manager.Manager
	elector  *consul.Elector
	registry *consul.Registrar
	api      *httpapi.Server
	listener net.Listener
	service  consul.Service
}

type leaderFunc func() bool

func (f leaderFunc) IsLeader() bool { return f() }

// NewAgent builds an agent from a config. A nil clock means the real one.
func NewAgent(cfg *config.Config, log hclog.Logger, clk clock.Clock) (*Agent, error) {
	if clk == nil {
		clk = clock.Real{}
	}
	a := &Agent{cfg: cfg, log: log, clk: clk}
	nc := cfg.NomadConfig()
	var err error
	a.nomad, err = nomadapi.NewClient(nc)
	if err != nil {
		return nil, fmt.Errorf("nomad client: %w", err)
	}
	if cfg.Consul.Enabled {
		a.consul, err = consulapi.NewClient(cfg.ConsulConfig())
		if err != nil {
			return nil, fmt.Errorf("consul client: %w", err)
		}
	}
	a.source = source.New(source.Config{
		Client: a.nomad, Clock: clk, Logger: log, Namespace: cfg.Nomad.Namespace,
		Wait: cfg.Nomad.BlockingWait, Device: cfg.Capacity.Device,
	})
	a.store = ingest.NewStore(cfg.Progress.MaxSamples)

	if err := a.listen(); err != nil {
		return nil, err
	}
	leader := a.electLeader()

	a.manager, err = manager.New(manager.Config{
		Settings: settings(cfg), Source: a.source, Progress: a.store,
		Writer: &submit.Writer{Client: a.nomad, Logger: log.Named("submit")},
		Leader: leader, Clock: clk, Logger: log,
	})
	if err != nil {
		a.listener.Close()
		return nil, err
	}

	plog := log.Named("progress")
	verifier, err := a.progressVerifier(nc, plog)
	if err != nil {
		a.listener.Close()
		return nil, err
	}
	a.api = &httpapi.Server{
		ID: a.service.ID, Version: Version, Rounds: a.manager, Leader: leader, Source: a.source, Logger: log.Named("http"),
		Progress: &ingest.Handler{
			Verifier: verifier, Store: a.store, Clock: clk, Logger: plog,
			Authorize: a.authorizeProgress,
		},
	}
	if cfg.UI.Enabled {
		page, err := ui.New(&ui.Server{
			Planner: a.manager, Progress: a.store, Token: cfg.UI.Token, Leader: leader.IsLeader, ID: a.service.ID,
			Logger: log.Named("ui"),
			Cluster: &ui.Gatherer{Nomad: ui.APINomad{Client: a.nomad}, Device: cfg.Capacity.Device,
				TTL: cfg.UI.StatsInterval, Logger: log.Named("ui")},
		})
		if err != nil {
			a.listener.Close()
			return nil, fmt.Errorf("planner web page: %w", err)
		}
		a.api.UI = page.Handler()
	}
	return a, nil
}

// listen opens the HTTP API's listener and describes the service that
// Consul registers: its ID, address and the port actually bound.
func (a *Agent) listen() error {
	cfg := a.cfg
	var err error
	a.listener, err = net.Listen("tcp", net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listening for the HTTP API: %w", err)
	}
	port := a.listener.Addr().(*net.TCPAddr).Port
	id := cfg.Consul.ServiceID
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s-%s-%d", cfg.Consul.ServiceName, host, port)
	}
	addr := cfg.Consul.ServiceAddress
	if addr == "" {
		addr = cfg.BindAddr
	}
	a.service = consul.Service{
		Name: cfg.Consul.ServiceName, ID: id, Address: addr, Port: port,
		HealthPath: "/v1/health", CheckInterval: cfg.Consul.CheckInterval,
	}
	if cfg.UI.Enabled {
		a.service.UIPath = ui.Prefix
	}
	return nil
}

// electLeader sets up Consul registration and leader election when Consul
// is enabled; without it this instance always leads.
func (a *Agent) electLeader() manager.Leader {
	var leader manager.Leader = consul.AlwaysLeader{}
	if a.consul == nil {
		return leader
	}
	cfg, svc := a.cfg, a.service
	a.registry = &consul.Registrar{Client: a.consul, Service: a.service, Clock: a.clk, Logger: a.log.Named("consul"),
		Every: max(cfg.Consul.CheckInterval, time.Second)}
	a.elector = consul.NewElector(consul.ElectorConfig{
		Client: a.consul, Key: cfg.Consul.LockKey, ID: svc.ID + " http://" + svc.Address + ":" + strconv.Itoa(svc.Port),
		CheckID: a.service.CheckID(), SessionTTL: cfg.Consul.SessionTTL, LockDelay: cfg.Consul.LockDelay,
		BeforeSession: a.registry.Ensure, Clock: a.clk, Logger: a.log,
	})
	leader = a.elector
	return leader
}

// progressVerifier checks progress reports' workload identities against
// the JWKS (by default Nomad's, over Nomad's TLS settings) and online
// against Nomad.
func (a *Agent) progressVerifier(nc *nomadapi.Config, plog hclog.Logger) (*ingest.Router, error) {
	cfg, clk := a.cfg, a.clk
	jwks := cfg.Progress.JWKSURL
	if jwks == "" {
		jwks = strings.TrimRight(nc.Address, "/") + "/.well-known/jwks.json"
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	if nc.TLSConfig != nil && strings.HasPrefix(jwks, "https://") {
		// The JWKS lives on the Nomad API: reuse its TLS settings.
		hc.Transport = &http.Transport{}
		if err := nomadapi.ConfigureTLS(hc, nc.TLSConfig); err != nil {
			return nil, fmt.Errorf("TLS for the JWKS endpoint: %w", err)
		}
	}
	keys := ingest.NewKeySet(jwks, hc, clk)
	keys.MaxAge = cfg.Progress.JWKSMaxAge
	keys.Logger = plog.Named("jwks")
	return &ingest.Router{
		JWKS: &ingest.Verifier{
			Keys: keys, Clock: clk,
			Audience: cfg.Progress.Audience, Issuer: cfg.Progress.Issuer, Leeway: 30 * time.Second,
		},
		Online: &ingest.OnlineChecker{
			Client: a.nomad, Clock: clk, Logger: plog, Leeway: 30 * time.Second,
			RefuseWithoutACLs: cfg.Progress.RefuseWithoutACLs,
		},
		JWKSURL: jwks, HTTP: hc, Clock: clk, ProbeEvery: cfg.Progress.JWKSMaxAge, Logger: plog,
	}, nil
}

func settings(cfg *config.Config) manager.Settings {
	return manager.Settings{Policy: cfg.Policy, Capacity: cfg.Capacity, DryRun: cfg.DryRun, Queues: cfg.Queues,
		QueueRightsize: cfg.QueueRightsize, Packing: cfg.Packing}
}

// authorizeProgress lets a verified workload report only for a managed job,
// and not from an allocation Nomad already considers finished or told to
// stop. Claims accepted unverified (Nomad without ACLs) must name a live
// allocation of the job the planner knows.
func (a *Agent) authorizeProgress(id ingest.Identity) error {
	snap := a.source.Snapshot()
	j, ok := snap.Jobs[source.JobKey{Namespace: id.Namespace, ID: id.JobID}]
	if !ok {
		return fmt.Errorf("%w: job %s/%s is not managed by the planner", ingest.ErrForbidden, id.Namespace, id.JobID)
	}
	return allocMayReport(j.Allocs, id)
}

func allocMayReport(allocs []*nomadapi.AllocationListStub, id ingest.Identity) error {
	for _, al := range allocs {
		if al.ID != id.AllocationID {
			continue
		}
		switch {
		case al.ClientStatus == "complete" || al.ClientStatus == "failed" || al.ClientStatus == "lost":
			return fmt.Errorf("%w: allocation %s is %s", ingest.ErrForbidden, id.AllocationID, al.ClientStatus)
		case al.DesiredStatus == "stop" || al.DesiredStatus == "evict":
			return fmt.Errorf("%w: allocation %s is told to %s", ingest.ErrForbidden, id.AllocationID, al.DesiredStatus)
		}
		return nil
	}
	if id.Unverified {
		return fmt.Errorf("%w: allocation %s is not a known allocation of job %s/%s (unverified token: Nomad enforces no ACLs)",
			ingest.ErrForbidden, id.AllocationID, id.Namespace, id.JobID)
	}
	return nil
}

// UIURL is the planner web page's address, as registered in Consul.
func (a *Agent) UIURL() string {
	return "http://" + net.JoinHostPort(a.service.Address, strconv.Itoa(a.service.Port)) + ui.Prefix
}

// Addr is the HTTP API's address.
func (a *Agent) Addr() string { return a.listener.Addr().String() }

// Reload applies a new config (SIGHUP): log level and the decision settings
// take effect now; addresses, ports and Consul settings need a restart.
func (a *Agent) Reload(cfg *config.Config) {
	a.mu.Lock()
	old := a.cfg
	a.cfg = cfg
	a.mu.Unlock()
	a.log.SetLevel(hclog.LevelFromString(cfg.LogLevel))
	if err := a.manager.Reload(settings(cfg)); err != nil {
		a.log.Error("reload: keeping the old decision settings", "error", err)
	}
	if old.Nomad != cfg.Nomad || old.Consul != cfg.Consul || old.BindAddr != cfg.BindAddr || old.Port != cfg.Port ||
		old.Capacity.Device != cfg.Capacity.Device || old.Progress != cfg.Progress || old.UI != cfg.UI {
		a.log.Warn("reload: nomad, consul, listener, capacity device, progress and ui settings take effect after a restart")
	}
	a.log.Info("config reloaded")
}

// Run serves until ctx ends, then stops cleanly: health turns 503, the
// service is deregistered, leadership released, the HTTP server drained.
func (a *Agent) Run(ctx context.Context) error {
	srv := a.api.HTTPServer(httpapi.DefaultLimits())
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(a.listener) }()
	a.log.Info("planner listening", "addr", a.Addr(), "dry_run", a.cfg.DryRun, "policy", a.cfg.Policy.Name)
	if a.api.UI != nil {
		a.log.Info("planner web page", "url", a.UIURL(), "token_required", a.cfg.UI.Token != "")
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				a.log.Error("component stopped", "component", name, "error", err)
			}
		}()
	}
	run("source", a.source.Run)
	run("manager", a.manager.Run)
	if a.consul != nil {
		run("consul registration", a.registry.Run)
		run("leader election", func(ctx context.Context) error {
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-a.elector.Changes():
						a.manager.Kick()
					}
				}
			}()
			return a.elector.Run(ctx)
		})
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-srvErr:
		err = fmt.Errorf("http server: %w", err)
	}
	a.api.SetStopping()
	cancel()
	wg.Wait()
	if a.consul != nil {
		if derr := consul.Deregister(a.consul, a.service.ID); derr != nil {
			a.log.Warn("consul deregistration failed", "error", derr)
		}
	}
	shutCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	_ = srv.Shutdown(shutCtx)
	return err
}

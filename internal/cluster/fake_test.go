package cluster

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
)

// fakeNomad is the part of Nomad's HTTP API the package reads and writes,
// over a few jobs and allocations held in memory.
type fakeNomad struct {
	mu     sync.Mutex
	jobs   map[string]*nomadapi.Job
	stubs  map[string][]*nomadapi.AllocationListStub // by job ID
	allocs map[string]*nomadapi.Allocation           // by allocation ID
	// stopped are the jobs stopped (or purged) so far.
	stopped map[string]bool
	// requests are "METHOD /path?query", in order.
	requests []string
	// stopAfter is how many allocation listings after a job's stop its
	// allocations still run; purgeStatus, when set, answers a purge.
	stopAfter   int
	purgeStatus int
	// scaled is the last scaling request.
	scaled *nomadapi.ScalingRequest
}

func newFakeNomad() *fakeNomad {
	return &fakeNomad{jobs: map[string]*nomadapi.Job{}, stubs: map[string][]*nomadapi.AllocationListStub{},
		allocs: map[string]*nomadapi.Allocation{}, stopped: map[string]bool{}}
}

// serve starts the fake and returns a Cluster on it (and on consul, if
// not nil).
func (f *fakeNomad) serve(t *testing.T, consul http.Handler) *Cluster {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg := Config{NomadAddr: srv.URL, ConsulAddr: "127.0.0.1:1", PollEvery: 5e6}
	if consul != nil {
		cs := httptest.NewServer(consul)
		t.Cleanup(cs.Close)
		cfg.ConsulAddr = cs.URL
	}
	c, err := Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fakeNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	switch {
	case len(parts) == 2 && parts[0] == "job" && r.Method == http.MethodGet:
		f.job(w, parts[1])
	case len(parts) == 2 && parts[0] == "job" && r.Method == http.MethodDelete:
		f.deregister(w, parts[1], r.URL.Query().Get("purge") == "true")
	case len(parts) == 3 && parts[0] == "job" && parts[2] == "allocations":
		f.listAllocs(w, parts[1])
	case len(parts) == 3 && parts[0] == "job" && parts[2] == "scale":
		f.scale(w, r)
	case len(parts) == 2 && parts[0] == "allocation":
		f.alloc(w, parts[1])
	case len(parts) == 2 && parts[0] == "node":
		http.Error(w, "node not found", http.StatusNotFound)
	default:
		http.Error(w, "the fake does not serve "+r.URL.Path, http.StatusNotImplemented)
	}
}

func (f *fakeNomad) job(w http.ResponseWriter, id string) {
	job, ok := f.jobs[id]
	if !ok {
		http.Error(w, "job not found", http.StatusNotFound)
		return
	}
	_ = json.NewEncoder(w).Encode(job)
}

func (f *fakeNomad) deregister(w http.ResponseWriter, id string, purge bool) {
	if _, ok := f.jobs[id]; !ok {
		http.Error(w, "job not found", http.StatusNotFound)
		return
	}
	if purge && f.purgeStatus != 0 {
		http.Error(w, "purge refused", f.purgeStatus)
		return
	}
	if purge {
		delete(f.jobs, id)
	}
	f.stopped[id] = true
	_ = json.NewEncoder(w).Encode(nomadapi.JobDeregisterResponse{EvalID: "eval"})
}

// listAllocs lists a job's allocations; once the job is stopped, they stop
// after stopAfter listings.
func (f *fakeNomad) listAllocs(w http.ResponseWriter, id string) {
	if f.stopped[id] {
		if f.stopAfter == 0 {
			for _, s := range f.stubs[id] {
				if s.ClientStatus == nomadapi.AllocClientStatusRunning {
					s.ClientStatus = nomadapi.AllocClientStatusComplete
				}
			}
		}
		f.stopAfter--
	}
	out := f.stubs[id]
	if out == nil {
		out = []*nomadapi.AllocationListStub{}
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (f *fakeNomad) scale(w http.ResponseWriter, r *http.Request) {
	f.scaled = &nomadapi.ScalingRequest{}
	if err := json.NewDecoder(r.Body).Decode(f.scaled); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_ = json.NewEncoder(w).Encode(nomadapi.JobRegisterResponse{EvalID: "eval"})
}

// alloc answers an allocation; a pending one is complete from its second
// read on.
func (f *fakeNomad) alloc(w http.ResponseWriter, id string) {
	a, ok := f.allocs[id]
	if !ok {
		http.Error(w, "alloc not found", http.StatusNotFound)
		return
	}
	_ = json.NewEncoder(w).Encode(a)
	if a.ClientStatus == nomadapi.AllocClientStatusPending {
		a.ClientStatus = nomadapi.AllocClientStatusComplete
	}
}

func (f *fakeNomad) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func ptr[T any](v T) *T { return &v }

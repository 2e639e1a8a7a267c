// Package httpapi is the planner's JSON HTTP API: health, managed jobs with
// their fitted models and predictions, the current plan with per-job gains
// and reasons, progress ingestion, leadership, and Prometheus metrics. Every
// instance serves reads; only the leader writes to Nomad.
package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/caravan-nomad/caravan/internal/metrics"
	"github.com/caravan-nomad/caravan/internal/version"
	"github.com/caravan-nomad/caravan/planner/service/manager"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// Rounds is the manager as the API reads it.
type Rounds interface {
	Last() *manager.Round
	MetricsSnapshot() manager.Metrics
}

// Leadership is the elector as the API reads it.
type Leadership interface{ IsLeader() bool }

// Server holds the API's dependencies.
type Server struct {
	ID       string
	Version  string
	Rounds   Rounds
	Leader   Leadership
	Source   interface{ Snapshot() source.Snapshot }
	Progress http.Handler
	// UI, when set, serves the planner's web page under /ui.
	UI     http.Handler
	Logger hclog.Logger

	stopping atomic.Bool
	mu       sync.Mutex
	reports  map[int]uint64 // progress responses by status code
}

// SetStopping makes health report 503, so Consul stops routing to this
// instance while it shuts down.
func (s *Server) SetStopping() { s.stopping.Store(true) }

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/health", s.get(s.health))
	mux.HandleFunc("/v1/jobs", s.get(s.jobs))
	mux.HandleFunc("/v1/jobs/", s.get(s.job))
	mux.HandleFunc("/v1/plan", s.get(s.plan))
	mux.HandleFunc("/v1/gpus", s.get(s.gpus))
	reg := metrics.NewRegistry(plannerCollector{s})
	mux.HandleFunc("/v1/metrics", s.get(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP))
	mux.Handle("/v1/progress", s.countProgress(s.Progress))
	if s.UI != nil {
		mux.Handle("/ui", s.UI)
		mux.Handle("/ui/", s.UI)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path+" (see planner/README.md)")
	})
	return mux
}

func (s *Server) get(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		h(w, r)
	}
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // messages quote paths like /v1/jobs/<namespace>/<id>
	if err := enc.Encode(v); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":"encoding response failed"}`))
		return
	}
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// Health is GET /v1/health.
type Health struct {
	Status   string `json:"status"` // ok or stopping
	ID       string `json:"id"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Leader   bool   `json:"leader"`
	Synced   bool   `json:"nomad_synced"`
	NomadErr string `json:"nomad_error,omitempty"`
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := Health{Status: "ok", ID: s.ID, Version: s.Version, Revision: version.GitCommit, Leader: s.Leader.IsLeader()}
	snap := s.Source.Snapshot()
	h.Synced = snap.Synced
	if snap.Err != nil {
		h.NomadErr = snap.Err.Error()
	}
	code := http.StatusOK
	if s.stopping.Load() {
		h.Status, code = "stopping", http.StatusServiceUnavailable
	}
	// Nomad being unreachable does not fail the check: the planner is alive
	// and retrying, and a failing check would hand leadership around for
	// nothing.
	writeJSON(w, code, h)
}

// JobsResponse is GET /v1/jobs: each element of Jobs is a manager.JobView
// (or, for a view that cannot be encoded, its namespace, id, state and a
// render_error).
type JobsResponse struct {
	Leader bool              `json:"leader"`
	Jobs   []json.RawMessage `json:"jobs"`
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	resp := JobsResponse{Leader: s.Leader.IsLeader(), Jobs: []json.RawMessage{}}
	if last := s.Rounds.Last(); last != nil {
		resp.Jobs = renderJobs(last.Jobs)
	}
	writeJSON(w, http.StatusOK, resp)
}

// job is GET /v1/jobs/<namespace>/<id>.
func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/jobs/")
	ns, id, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || id == "" {
		writeError(w, http.StatusBadRequest, "want /v1/jobs/<namespace>/<job id>")
		return
	}
	if last := s.Rounds.Last(); last != nil {
		for _, j := range last.Jobs {
			if j.Namespace == ns && j.ID == id {
				writeJSON(w, http.StatusOK, renderJob(j))
				return
			}
		}
	}
	writeError(w, http.StatusNotFound, "job "+ns+"/"+id+" is not managed by the planner (no caravan_planner meta, or not seen yet)")
}

func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	last := s.Rounds.Last()
	if last == nil {
		writeError(w, http.StatusServiceUnavailable, "no decision round yet")
		return
	}
	writeJSON(w, http.StatusOK, renderRound(last))
}

// statusRecorder captures a handler's response code.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) countProgress(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		s.mu.Lock()
		if s.reports == nil {
			s.reports = map[int]uint64{}
		}
		s.reports[rec.code]++
		s.mu.Unlock()
	})
}

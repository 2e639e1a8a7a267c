// Package jobtimetest is a fake Nomad HTTP API serving one job the way Nomad
// shows it after a number of scales, for tests of JCT readers.
package jobtimetest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// TrackedVersions is how many versions of a job Nomad keeps by default.
const TrackedVersions = 6

// createIndex is the fake job's create index.
const createIndex = uint64(10)

// Scenario is one job's life: submitted at Submit (create index 10), its
// first allocation placed QueueFor later, scaled Scales times (a new
// version each, ScaleEvery apart after that), its last task ending at
// Finish.
type Scenario struct {
	JobID      string
	Submit     time.Time
	QueueFor   time.Duration
	Scales     int
	ScaleEvery time.Duration
	Finish     time.Time
	// StaleAlloc adds an allocation of an earlier incarnation of the same
	// job ID (purged and resubmitted), created and ended before Submit.
	StaleAlloc bool
}

// Serve starts the fake API; its URL is the Nomad address.
func Serve(t testing.TB, s Scenario) *httptest.Server {
	t.Helper()
	versions, evals := history(s)
	current := versions[len(versions)-1]
	listed := []*nomadapi.Job{} // the kept versions, newest first
	for i := len(versions) - 1; i >= max(0, len(versions)-TrackedVersions); i-- {
		listed = append(listed, versions[i])
	}
	allocs := []*nomadapi.AllocationListStub{alloc("a1", createIndex+1, s.Submit.Add(s.QueueFor), s.Finish)}
	if s.StaleAlloc {
		allocs = append(allocs, alloc("a0", createIndex-5, s.Submit.Add(-time.Hour), s.Submit.Add(-time.Minute)))
	}
	routes := map[string]any{
		"/v1/job/" + s.JobID:                  current,
		"/v1/job/" + s.JobID + "/versions":    map[string]any{"Versions": listed},
		"/v1/job/" + s.JobID + "/evaluations": evals,
		"/v1/job/" + s.JobID + "/allocations": allocs,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := routes[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Nomad-Index", "100")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// history is the job's versions, oldest first, and the evaluations of its
// registration and of each scale.
func history(s Scenario) ([]*nomadapi.Job, []*nomadapi.Evaluation) {
	var versions []*nomadapi.Job
	var evals []*nomadapi.Evaluation
	for v := 0; v <= s.Scales; v++ {
		at := s.Submit
		if v > 0 {
			at = s.Submit.Add(s.QueueFor + time.Duration(v)*s.ScaleEvery)
		}
		idx := createIndex + uint64(2*v)
		versions = append(versions, job(s.JobID, uint64(v), idx, at))
		evals = append(evals, &nomadapi.Evaluation{ID: "eval-" + string(rune('a'+v)), JobID: s.JobID,
			CreateIndex: idx, CreateTime: at.UnixNano()})
	}
	return versions, evals
}

func job(id string, version, modifyIndex uint64, submitted time.Time) *nomadapi.Job {
	created, sub, status := createIndex, submitted.UnixNano(), "dead"
	return &nomadapi.Job{ID: &id, Name: &id, Version: &version, CreateIndex: &created,
		JobModifyIndex: &modifyIndex, SubmitTime: &sub, Status: &status}
}

func alloc(id string, createIdx uint64, created, finished time.Time) *nomadapi.AllocationListStub {
	return &nomadapi.AllocationListStub{ID: id, CreateIndex: createIdx, CreateTime: created.UnixNano(),
		ClientStatus: "complete", TaskGroup: "ps",
		TaskStates: map[string]*nomadapi.TaskState{"ps": {State: "dead", StartedAt: created, FinishedAt: finished}}}
}

// Package fakenomad is an httptest fake of the slice of Nomad's HTTP API the
// planner uses: job list/read/register/scale/scale-status, allocation and
// node lists, with blocking queries (X-Nomad-Index / ?index=) and job modify
// index enforcement as Nomad does it. Tests drive it directly.
package fakenomad

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Server is a fake Nomad.
type Server struct {
	*httptest.Server

	mu      sync.Mutex
	changed *sync.Cond
	index   uint64
	jobs    map[string]*nomadapi.Job // by namespace/id
	allocs  []*nomadapi.AllocationListStub
	nodes   []*nomadapi.NodeListStub
	events  map[string]map[string][]nomadapi.ScalingEvent // job -> group -> events
	// Down makes every request fail with 500 while true.
	down bool
	// Requests counts requests by method and path (without query).
	Requests map[string]int
	// Writes records every accepted write ("scale ns/id group count", "register ns/id").
	Writes []string
	// planFail is what a dry run (job plan) of a job reports unplaced, by
	// namespace/id and group; planCode, when set, fails every plan with it.
	planFail map[string]map[string]*nomadapi.AllocationMetric
	planCode int
	// Plans records every dry run ("plan ns/id group=count ...").
	Plans []string
	// acls makes the variables endpoint check tokens; identities are the
	// workload identity tokens it accepts, by token: namespace/job.
	acls       bool
	identities map[string]string
	// scaleIgnoresIndex makes scale requests ignore JobModifyIndex, as a
	// Nomad agent before 1.8.2 does.
	scaleIgnoresIndex bool
}

// New starts a fake Nomad; Close it when done.
func New() *Server {
	s := &Server{
		index:    10,
		jobs:     map[string]*nomadapi.Job{},
		events:   map[string]map[string][]nomadapi.ScalingEvent{},
		Requests: map[string]int{},
	}
	s.changed = sync.NewCond(&s.mu)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Client returns an API client for the fake.
func (s *Server) Client() *nomadapi.Client {
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: s.URL})
	if err != nil {
		panic(err)
	}
	return c
}

func key(ns, id string) string { return ns + "/" + id }

func (s *Server) bump() uint64 {
	s.index++
	s.changed.Broadcast()
	return s.index
}

// SetDown makes the fake fail (or recover).
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// PutJob registers (or replaces) a job as a user would, bumping its indexes
// and version.
func (s *Server) PutJob(job *nomadapi.Job) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putJobLocked(job)
}

func (s *Server) putJobLocked(job *nomadapi.Job) uint64 {
	job.Canonicalize()
	idx := s.bump()
	k := key(*job.Namespace, *job.ID)
	version := uint64(0)
	if old, ok := s.jobs[k]; ok {
		version = *old.Version + 1
		job.CreateIndex = old.CreateIndex
		job.SubmitTime = old.SubmitTime
	} else {
		job.CreateIndex = &idx
		now := time.Now().UnixNano()
		if job.SubmitTime == nil || *job.SubmitTime == 0 {
			job.SubmitTime = &now
		}
	}
	job.Version = &version
	job.ModifyIndex = &idx
	jmi := idx
	job.JobModifyIndex = &jmi
	status := "running"
	job.Status = &status
	s.jobs[k] = job
	return idx
}

// SetJobStatus sets a stored job's status as Nomad reports it ("dead" once
// a batch job's allocations are all complete), as a new modify index.
func (s *Server) SetJobStatus(ns, id, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	job := s.jobs[key(ns, id)]
	idx := s.bump()
	job.ModifyIndex = &idx
	job.Status = &status
}

// Job returns a copy of a stored job.
func (s *Server) Job(ns, id string) *nomadapi.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[key(ns, id)]
	if !ok {
		return nil
	}
	b, _ := json.Marshal(j)
	var cp nomadapi.Job
	_ = json.Unmarshal(b, &cp)
	return &cp
}

// SetAllocs replaces the allocation list.
func (s *Server) SetAllocs(allocs []*nomadapi.AllocationListStub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.bump()
	for _, a := range allocs {
		if a.ModifyIndex == 0 {
			a.ModifyIndex = idx
		}
		if a.CreateIndex == 0 {
			a.CreateIndex = idx
		}
	}
	s.allocs = allocs
}

// SetNodes replaces the node list.
func (s *Server) SetNodes(nodes []*nomadapi.NodeListStub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump()
	s.nodes = nodes
}

// Events returns a group's scaling events.
func (s *Server) Events(ns, id, group string) []nomadapi.ScalingEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]nomadapi.ScalingEvent(nil), s.events[key(ns, id)][group]...)
}

// AddEvent records a scaling event (as if written earlier).
func (s *Server) AddEvent(ns, id, group string, ev nomadapi.ScalingEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(ns, id)
	if s.events[k] == nil {
		s.events[k] = map[string][]nomadapi.ScalingEvent{}
	}
	s.events[k][group] = append(s.events[k][group], ev)
}

// RequestCount returns how many requests a "METHOD /path" received.
func (s *Server) RequestCount(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Requests[key]
}

// WritesSnapshot returns the accepted writes so far.
func (s *Server) WritesSnapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.Writes...)
}

func (s *Server) fail(w http.ResponseWriter, code int, msg string) {
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}

func (s *Server) reply(w http.ResponseWriter, v any) {
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(s.index, 10))
	w.Header().Set("X-Nomad-KnownLeader", "true")
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// block waits (lock held) until the index passes ?index= or ?wait= elapses.
func (s *Server) block(r *http.Request) {
	idx, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	if idx == 0 {
		return
	}
	wait := 300 * time.Millisecond
	if d, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil && d < wait {
		wait = d
	}
	deadline := time.Now().Add(wait)
	timer := time.AfterFunc(wait, func() {
		s.mu.Lock()
		s.changed.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	for s.index <= idx && time.Now().Before(deadline) && r.Context().Err() == nil {
		s.changed.Wait()
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Requests[r.Method+" "+r.URL.Path]++
	if s.down {
		s.fail(w, 500, "fake nomad is down")
		return
	}
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		ns = "default"
	}
	p := r.URL.Path
	switch {
	case p == "/v1/jobs" && r.Method == http.MethodGet:
		s.block(r)
		var out []*nomadapi.JobListStub
		keys := make([]string, 0, len(s.jobs))
		for k := range s.jobs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			j := s.jobs[k]
			if ns != "*" && *j.Namespace != ns {
				continue
			}
			out = append(out, &nomadapi.JobListStub{
				ID: *j.ID, Namespace: *j.Namespace, Name: *j.Name, Status: *j.Status, Stop: *j.Stop,
				Meta: j.Meta, JobModifyIndex: *j.JobModifyIndex, ModifyIndex: *j.ModifyIndex,
			})
		}
		s.reply(w, out)
	case p == "/v1/jobs" && r.Method == http.MethodPut:
		var req nomadapi.JobRegisterRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			s.fail(w, 400, err.Error())
			return
		}
		k := key(*req.Job.Namespace, *req.Job.ID)
		if req.EnforceIndex {
			cur, ok := s.jobs[k]
			if !ok || *cur.JobModifyIndex != req.JobModifyIndex {
				have := uint64(0)
				if ok {
					have = *cur.JobModifyIndex
				}
				s.fail(w, 500, fmt.Sprintf("%s %d: job exists with conflicting job modify index: %d",
					nomadapi.RegisterEnforceIndexErrPrefix, req.JobModifyIndex, have))
				return
			}
		}
		idx := s.putJobLocked(req.Job)
		s.Writes = append(s.Writes, "register "+k)
		s.reply(w, nomadapi.JobRegisterResponse{EvalID: fmt.Sprintf("eval-%d", idx), JobModifyIndex: idx})
	case strings.HasPrefix(p, "/v1/job/"):
		s.serveJob(w, r, ns, strings.TrimPrefix(p, "/v1/job/"))
	case p == "/v1/allocations":
		s.block(r)
		var out []*nomadapi.AllocationListStub
		for _, a := range s.allocs {
			if ns == "*" || a.Namespace == ns {
				out = append(out, a)
			}
		}
		s.reply(w, out)
	case strings.HasPrefix(p, "/v1/var/") && r.Method == http.MethodGet:
		s.serveVariable(w, r, ns, strings.TrimPrefix(p, "/v1/var/"))
	case p == "/v1/nodes":
		s.block(r)
		s.reply(w, s.nodes)
	default:
		s.fail(w, 404, "fake nomad: no route "+p)
	}
}

func (s *Server) serveJob(w http.ResponseWriter, r *http.Request, ns, rest string) {
	id, sub, _ := strings.Cut(rest, "/")
	k := key(ns, id)
	job, ok := s.jobs[k]
	if !ok {
		s.fail(w, 404, "job not found")
		return
	}
	switch {
	case sub == "" && r.Method == http.MethodGet:
		s.reply(w, job)
	case sub == "plan" && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		s.servePlan(w, r, k)
	case sub == "scale" && r.Method == http.MethodGet:
		resp := nomadapi.JobScaleStatusResponse{JobID: id, Namespace: ns, JobModifyIndex: *job.JobModifyIndex,
			JobStopped: *job.Stop, TaskGroups: map[string]nomadapi.TaskGroupScaleStatus{}}
		for _, tg := range job.TaskGroups {
			resp.TaskGroups[*tg.Name] = nomadapi.TaskGroupScaleStatus{Desired: *tg.Count, Events: s.events[k][*tg.Name]}
		}
		s.reply(w, resp)
	case sub == "scale" && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		var req nomadapi.ScalingRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			s.fail(w, 400, err.Error())
			return
		}
		if !s.scaleIgnoresIndex && req.JobModifyIndex > 0 && req.JobModifyIndex != *job.JobModifyIndex {
			s.fail(w, 500, fmt.Sprintf("%s %d: job exists with conflicting job modify index: %d",
				nomadapi.RegisterEnforceIndexErrPrefix, req.JobModifyIndex, *job.JobModifyIndex))
			return
		}
		if req.Error && req.Count != nil {
			s.fail(w, 400, "scaling action should not contain count if error is true")
			return
		}
		group := req.Target["Group"]
		var tg *nomadapi.TaskGroup
		for _, g := range job.TaskGroups {
			if *g.Name == group {
				tg = g
			}
		}
		if tg == nil {
			s.fail(w, 400, "task group not found")
			return
		}
		prev := int64(*tg.Count)
		if s.events[k] == nil {
			s.events[k] = map[string][]nomadapi.ScalingEvent{}
		}
		if req.Count == nil { // an event only: the job does not change
			idx := s.bump()
			s.events[k][group] = append(s.events[k][group], nomadapi.ScalingEvent{
				PreviousCount: prev, Error: req.Error, Message: req.Message, Meta: req.Meta,
				Time: uint64(time.Now().UnixNano()), CreateIndex: idx,
			})
			s.reply(w, nomadapi.JobRegisterResponse{JobModifyIndex: *job.JobModifyIndex})
			return
		}
		c := int(*req.Count)
		tg.Count = &c
		idx := s.bump()
		v := *job.Version + 1
		job.Version = &v
		job.ModifyIndex = &idx
		jmi := idx
		job.JobModifyIndex = &jmi
		if s.events[k] == nil {
			s.events[k] = map[string][]nomadapi.ScalingEvent{}
		}
		s.events[k][group] = append(s.events[k][group], nomadapi.ScalingEvent{
			Count: req.Count, PreviousCount: prev, Error: req.Error, Message: req.Message, Meta: req.Meta,
			Time: uint64(time.Now().UnixNano()), CreateIndex: idx,
		})
		s.Writes = append(s.Writes, fmt.Sprintf("scale %s %s %d", k, group, *req.Count))
		s.reply(w, nomadapi.JobRegisterResponse{EvalID: fmt.Sprintf("eval-%d", idx), JobModifyIndex: idx})
	default:
		s.fail(w, 404, "fake nomad: no route "+r.URL.Path)
	}
}

// SetPlanFailures makes dry runs of the job report these groups' allocations
// unplaced (nil: every plan fits).
func (s *Server) SetPlanFailures(ns, id string, failed map[string]*nomadapi.AllocationMetric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.planFail == nil {
		s.planFail = map[string]map[string]*nomadapi.AllocationMetric{}
	}
	s.planFail[key(ns, id)] = failed
}

// SetPlanStatus fails every dry run with this HTTP status (0: plans answer).
func (s *Server) SetPlanStatus(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.planCode = code
}

// PlansSnapshot returns the dry runs so far.
func (s *Server) PlansSnapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.Plans...)
}

// servePlan answers a job plan: nothing changes; the groups set by
// SetPlanFailures are reported unplaced.
func (s *Server) servePlan(w http.ResponseWriter, r *http.Request, k string) {
	var req nomadapi.JobPlanRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		s.fail(w, 400, err.Error())
		return
	}
	if s.planCode != 0 {
		s.fail(w, s.planCode, "Permission denied")
		return
	}
	rec := "plan " + k
	for _, tg := range req.Job.TaskGroups {
		rec += fmt.Sprintf(" %s=%d", *tg.Name, *tg.Count)
	}
	s.Plans = append(s.Plans, rec)
	s.reply(w, nomadapi.JobPlanResponse{JobModifyIndex: *s.jobs[k].JobModifyIndex, FailedTGAllocs: s.planFail[k]})
}

// TrainingJob builds an opted-in job with one worker group of count workers.
func TrainingJob(id string, count int, meta map[string]string) *nomadapi.Job {
	m := map[string]string{"caravan_planner": "true", "caravan_gpu_shares": "2"}
	for k, v := range meta {
		m[k] = v
	}
	job := nomadapi.NewServiceJob(id, id, "global", 50)
	job.Meta = m
	tg := nomadapi.NewTaskGroup("worker", count)
	tg.AddTask(nomadapi.NewTask("train", "raw_exec"))
	job.AddTaskGroup(tg)
	return job
}

// SetACLs turns token checks of the variables endpoint on or off (off: every
// read answers 404, as an agent without ACLs does for a missing variable).
func (s *Server) SetACLs(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acls = on
}

// AddIdentity makes token a workload identity of job ns/id: with ACLs on,
// it may read the variables path nomad/jobs/<id> in ns and nothing else.
func (s *Server) AddIdentity(token, ns, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.identities == nil {
		s.identities = map[string]string{}
	}
	s.identities[token] = key(ns, id)
}

// RevokeIdentity makes Nomad refuse token from now on, as it refuses the
// identity of an allocation that became terminal.
func (s *Server) RevokeIdentity(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.identities, token)
}

// SetScaleIgnoresIndex makes scales ignore JobModifyIndex (Nomad < 1.8.2).
func (s *Server) SetScaleIgnoresIndex(ignore bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scaleIgnoresIndex = ignore
}

// serveVariable answers a variable read: no variable exists, so 404 when
// the token may read the path, 403 when it may not.
func (s *Server) serveVariable(w http.ResponseWriter, r *http.Request, ns, path string) {
	if !s.acls {
		s.fail(w, 404, "variable not found")
		return
	}
	job, ok := strings.CutPrefix(path, "nomad/jobs/")
	grant, known := s.identities[r.Header.Get("X-Nomad-Token")]
	if !ok || !known || grant != key(ns, job) {
		s.fail(w, 403, "Permission denied")
		return
	}
	s.fail(w, 404, "variable not found")
}

// Package fakeconsul is an httptest fake of the slice of Consul's HTTP API
// the planner uses: agent service (de)registration, sessions, and KV with
// acquire/release and blocking queries, enough for consul/api's Lock.
package fakeconsul

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
)

// Server is a fake Consul.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	changed  *sync.Cond
	index    uint64
	nextID   int
	kv       map[string]*consulapi.KVPair
	sessions map[string]consulapi.SessionEntry
	services map[string]consulapi.AgentServiceRegistration
	frozen   sync.RWMutex // held for writing while frozen
}

// New starts a fake Consul.
func New() *Server {
	s := &Server{index: 1, kv: map[string]*consulapi.KVPair{}, sessions: map[string]consulapi.SessionEntry{},
		services: map[string]consulapi.AgentServiceRegistration{}}
	s.changed = sync.NewCond(&s.mu)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Client returns an API client for the fake.
func (s *Server) Client() *consulapi.Client {
	cfg := consulapi.DefaultConfig()
	cfg.Address = strings.TrimPrefix(s.URL, "http://")
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		panic(err)
	}
	return c
}

func (s *Server) bump() {
	s.index++
	s.changed.Broadcast()
}

// Sessions lists the live session IDs.
func (s *Server) Sessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.sessions {
		out = append(out, id)
	}
	return out
}

// Holder returns the session holding key ("" if none) and the key's value.
func (s *Server) Holder(key string) (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.kv[key]
	if !ok {
		return "", ""
	}
	return p.Session, string(p.Value)
}

// Services lists the registered service IDs.
func (s *Server) Services() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.services {
		out = append(out, id)
	}
	return out
}

// Wipe makes the fake lose all its state, as a Consul agent restarted
// without its data directory does: services, checks, sessions and keys.
func (s *Server) Wipe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kv = map[string]*consulapi.KVPair{}
	s.sessions = map[string]consulapi.SessionEntry{}
	s.services = map[string]consulapi.AgentServiceRegistration{}
	s.bump()
}

// Freeze makes every request wait until Thaw, as a Consul stopped with
// SIGSTOP does.
func (s *Server) Freeze() {
	s.frozen.Lock()
}

// Thaw ends a Freeze.
func (s *Server) Thaw() {
	s.frozen.Unlock()
}

// checks lists the registered checks by ID; s.mu is held.
func (s *Server) checks() map[string]*consulapi.AgentCheck {
	out := map[string]*consulapi.AgentCheck{}
	for _, reg := range s.services {
		if reg.Check != nil && reg.Check.CheckID != "" {
			out[reg.Check.CheckID] = &consulapi.AgentCheck{CheckID: reg.Check.CheckID, ServiceID: reg.ID,
				Name: reg.Check.Name, Status: consulapi.HealthPassing}
		}
	}
	return out
}

// Invalidate kills a session as Consul does when its health check fails:
// locks it holds are released.
func (s *Server) Invalidate(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.invalidateLocked(id)
}

func (s *Server) invalidateLocked(id string) {
	delete(s.sessions, id)
	for _, p := range s.kv {
		if p.Session == id {
			p.Session = ""
			p.ModifyIndex = s.index + 1
		}
	}
	s.bump()
}

func (s *Server) reply(w http.ResponseWriter, v any) {
	w.Header().Set("X-Consul-Index", strconv.FormatUint(s.index, 10))
	w.Header().Set("X-Consul-KnownLeader", "true")
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) block(r *http.Request) {
	idx, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	if idx == 0 {
		return
	}
	wait := time.Second
	if d, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil && d < wait {
		wait = d
	}
	deadline := time.Now().Add(wait)
	t := time.AfterFunc(wait, func() { s.mu.Lock(); s.changed.Broadcast(); s.mu.Unlock() })
	defer t.Stop()
	for s.index <= idx && time.Now().Before(deadline) {
		s.changed.Wait()
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.frozen.RLock()
	s.frozen.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := r.URL.Path
	q := r.URL.Query()
	switch {
	case p == "/v1/agent/service/register":
		var reg consulapi.AgentServiceRegistration
		if err := json.NewDecoder(r.Body).Decode(&reg); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		s.services[reg.ID] = reg
		s.bump()
	case strings.HasPrefix(p, "/v1/agent/service/deregister/"):
		delete(s.services, strings.TrimPrefix(p, "/v1/agent/service/deregister/"))
		s.bump()
	case p == "/v1/agent/checks":
		s.reply(w, s.checks())
	case p == "/v1/session/create":
		s.createSession(w, r)
	case strings.HasPrefix(p, "/v1/session/renew/"):
		id := strings.TrimPrefix(p, "/v1/session/renew/")
		se, ok := s.sessions[id]
		if !ok {
			http.Error(w, "session not found", 404)
			return
		}
		s.reply(w, []consulapi.SessionEntry{se})
	case strings.HasPrefix(p, "/v1/session/destroy/"):
		s.invalidateLocked(strings.TrimPrefix(p, "/v1/session/destroy/"))
		s.reply(w, true)
	case strings.HasPrefix(p, "/v1/kv/"):
		key := strings.TrimPrefix(p, "/v1/kv/")
		s.serveKV(w, r, key, q)
	default:
		http.Error(w, "fake consul: no route "+p, 404)
	}
}

// createSession serves /v1/session/create. s.mu is held.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var se consulapi.SessionEntry
	_ = json.NewDecoder(r.Body).Decode(&se)
	checks := s.checks()
	for _, sc := range se.ServiceChecks {
		if _, ok := checks[sc.ID]; !ok {
			// What Consul answers for a session on a check it lost.
			http.Error(w, fmt.Sprintf("Missing check '%s' registration", sc.ID), 500)
			return
		}
	}
	s.nextID++
	id := fmt.Sprintf("session-%d", s.nextID)
	se.ID = id
	s.sessions[id] = se
	s.bump()
	s.reply(w, map[string]string{"ID": id})
}

// serveKV serves /v1/kv/<key>. s.mu is held.
func (s *Server) serveKV(w http.ResponseWriter, r *http.Request, key string, q url.Values) {
	switch r.Method {
	case http.MethodGet:
		s.block(r)
		pair, ok := s.kv[key]
		if !ok {
			w.Header().Set("X-Consul-Index", strconv.FormatUint(s.index, 10))
			w.WriteHeader(404)
			return
		}
		s.reply(w, []*consulapi.KVPair{pair})
	case http.MethodPut:
		s.putKV(w, r, key, q)
	case http.MethodDelete:
		if cur := s.kv[key]; cur != nil && cur.Session == "" {
			delete(s.kv, key)
		}
		s.bump()
		s.reply(w, true)
	}
}

// putKV serves a PUT of /v1/kv/<key>: acquire, release or a plain write.
// s.mu is held.
func (s *Server) putKV(w http.ResponseWriter, r *http.Request, key string, q url.Values) {
	body, _ := io.ReadAll(r.Body)
	flags, _ := strconv.ParseUint(q.Get("flags"), 10, 64)
	cur := s.kv[key]
	switch {
	case q.Has("acquire"):
		sid := q.Get("acquire")
		if _, live := s.sessions[sid]; !live || (cur != nil && cur.Session != "" && cur.Session != sid) {
			s.reply(w, false)
			return
		}
		if cur == nil {
			cur = &consulapi.KVPair{Key: key, CreateIndex: s.index + 1}
			s.kv[key] = cur
		}
		cur.Value, cur.Flags, cur.Session = body, flags, sid
		cur.LockIndex++
		cur.ModifyIndex = s.index + 1
		s.bump()
		s.reply(w, true)
	case q.Has("release"):
		if cur == nil || cur.Session != q.Get("release") {
			s.reply(w, false)
			return
		}
		cur.Session = ""
		cur.ModifyIndex = s.index + 1
		s.bump()
		s.reply(w, true)
	default:
		if cur == nil {
			cur = &consulapi.KVPair{Key: key, CreateIndex: s.index + 1}
			s.kv[key] = cur
		}
		cur.Value, cur.Flags = body, flags
		cur.ModifyIndex = s.index + 1
		s.bump()
		s.reply(w, true)
	}
}

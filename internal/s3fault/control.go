package s3fault

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Spec is a fault as the control endpoint takes it, in JSON: the requests
// it matches by method and by a piece of their path, instead of Fault's
// function. TEST ONLY, like the whole package.
type Spec struct {
	// Kind is slow_down, reset_body or delay.
	Kind string `json:"kind"`
	// Method, when set, is the only HTTP method matched (PUT, GET...).
	Method string `json:"method,omitempty"`
	// PathContains, when set, must occur in the request's path (for
	// example "/chunks/" for the store's chunks, "/gen-" for its
	// manifests).
	PathContains string `json:"path_contains,omitempty"`
	// Times is Fault.Times: 0 applies it until cleared.
	Times int `json:"times,omitempty"`
	// Delay is a Go duration ("8s"), for delay.
	Delay string `json:"delay,omitempty"`
	// ResetAfter is Fault.ResetAfter, for reset_body.
	ResetAfter int64 `json:"reset_after,omitempty"`
}

// Stats is what the control endpoint reports.
type Stats struct {
	// Requests is how many requests the proxy has received.
	Requests int `json:"requests"`
	// Injected counts the requests that got a fault, by kind.
	Injected map[string]int `json:"injected"`
	// Active is how many faults are set and not used up.
	Active int `json:"active"`
}

// kinds are the Kind names the control endpoint takes.
var kinds = map[string]Kind{SlowDown.String(): SlowDown, ResetBody.String(): ResetBody, Delay.String(): Delay}

// Fault turns s into a Fault, or says which field is wrong.
func (s Spec) Fault() (Fault, error) {
	k, ok := kinds[s.Kind]
	if !ok {
		return Fault{}, fmt.Errorf("kind: %q is not slow_down, reset_body or delay", s.Kind)
	}
	f := Fault{Kind: k, Times: s.Times, ResetAfter: s.ResetAfter}
	if s.Times < 0 {
		return Fault{}, fmt.Errorf("times: %d is negative", s.Times)
	}
	if s.ResetAfter < 0 {
		return Fault{}, fmt.Errorf("reset_after: %d is negative", s.ResetAfter)
	}
	if k == Delay {
		d, err := time.ParseDuration(s.Delay)
		if err != nil || d <= 0 {
			return Fault{}, fmt.Errorf("delay: %q is not a positive duration", s.Delay)
		}
		f.Delay = d
	}
	method, part := strings.ToUpper(s.Method), s.PathContains
	if method != "" || part != "" {
		f.Match = func(r *http.Request) bool {
			return (method == "" || r.Method == method) && strings.Contains(r.URL.Path, part)
		}
	}
	return f, nil
}

// Stats reports the proxy's counts.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Requests: p.seen, Injected: map[string]int{}, Active: len(p.faults)}
	for k, n := range p.injected {
		st.Injected[k.String()] = n
	}
	return st
}

// Control is the handler of the proxy's control endpoint, for tests that
// drive a proxy in another process (scripts/cluster.sh starts one with
// CARAVAN_S3_FAULT_PROXY=1). Serve it on loopback only:
//
//	POST   /faults  a Spec (JSON): adds the fault; 400 naming the field if it is wrong
//	DELETE /faults  clears every fault (and ends the delays under way)
//	GET    /stats   the Stats (JSON)
func (p *Proxy) Control() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var s Spec
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			http.Error(w, "s3fault: the body is not a fault spec: "+err.Error(), http.StatusBadRequest)
			return
		}
		f, err := s.Fault()
		if err != nil {
			http.Error(w, "s3fault: "+err.Error(), http.StatusBadRequest)
			return
		}
		p.logger.Info("fault set", "kind", s.Kind, "method", s.Method, "path_contains", s.PathContains,
			"times", s.Times, "delay", s.Delay, "reset_after", s.ResetAfter)
		p.Inject(f)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, r *http.Request) {
		p.logger.Info("faults cleared")
		p.Clear()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.Stats())
	})
	return mux
}

// Client drives a proxy's control endpoint.
type Client struct {
	// URL is the control endpoint's base URL (http://127.0.0.1:<port>).
	URL  string
	HTTP *http.Client
}

func (c Client) do(method, path string, body io.Reader, out any) error {
	req, err := http.NewRequest(method, strings.TrimRight(c.URL, "/")+path, body)
	if err != nil {
		return err
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("s3fault control %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("s3fault control %s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// Inject sets a fault.
func (c Client) Inject(s Spec) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return c.do(http.MethodPost, "/faults", strings.NewReader(string(b)), nil)
}

// Clear removes every fault.
func (c Client) Clear() error { return c.do(http.MethodDelete, "/faults", nil, nil) }

// Stats reads the proxy's counts.
func (c Client) Stats() (Stats, error) {
	var st Stats
	err := c.do(http.MethodGet, "/stats", nil, &st)
	if err == nil && st.Injected == nil {
		err = errors.New("s3fault control GET /stats: no counts in the answer")
	}
	return st, err
}

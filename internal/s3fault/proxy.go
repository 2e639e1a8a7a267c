// Package s3fault is a reverse proxy for tests that stands in front of a real
// S3 server and injects, on demand, the faults a real server will not produce
// when asked: a 503 "SlowDown" answer, a connection reset in the middle of an
// upload's body, and a delay. Requests no fault matches pass through
// unchanged, Host header included, so SigV4 signatures made for the proxy's
// address still verify at the server.
package s3fault

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Kind is what a fault does to a request.
type Kind int

const (
	// SlowDown answers 503 with the S3 error code SlowDown, without
	// forwarding the request.
	SlowDown Kind = iota + 1
	// ResetBody reads ResetAfter bytes of the request's body, then resets
	// the connection (a TCP RST): the client sees its upload cut off.
	ResetBody
	// Delay waits Delay before forwarding the request (less if Clear is
	// called first; not at all if the client gives up first).
	Delay
)

func (k Kind) String() string {
	switch k {
	case SlowDown:
		return "slow_down"
	case ResetBody:
		return "reset_body"
	case Delay:
		return "delay"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Fault is one injected fault.
type Fault struct {
	Kind Kind
	// Match picks the requests it applies to; nil matches every request.
	Match func(*http.Request) bool
	// Times is how many requests it applies to; 0 means every matching
	// request until Clear.
	Times int
	// Delay is how long Delay waits.
	Delay time.Duration
	// ResetAfter is how many body bytes ResetBody lets through first.
	ResetAfter int64
}

// Uploads matches requests that carry an object's bytes: PUT of an object
// or of a multipart part.
func Uploads(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.Count(strings.Trim(r.URL.Path, "/"), "/") >= 1
}

// Proxy forwards requests to one S3 server, applying the faults injected.
type Proxy struct {
	logger hclog.Logger
	rp     *httputil.ReverseProxy

	mu       sync.Mutex
	faults   []*Fault
	injected map[Kind]int
	seen     int
	// notify is closed and replaced at each request, for WaitRequests.
	notify chan struct{}
	// cleared is closed and replaced by Clear: it ends the delays under
	// way (the server does not notice a client that went away while the
	// request's body is unread).
	cleared chan struct{}
}

// New returns a proxy to target (scheme and host of the S3 server).
func New(target *url.URL, logger hclog.Logger) *Proxy {
	p := &Proxy{logger: logger.Named("s3fault"), injected: map[Kind]int{}, notify: make(chan struct{}),
		cleared: make(chan struct{})}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// The client signed the Host it sent: keep it.
			r.Out.Host = r.In.Host
		},
		ErrorLog: logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		// A server that cannot be reached (stopped, say) looks unreachable
		// through the proxy too: the client's connection is dropped, not
		// answered with a 502 the server never sent.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.logger.Debug("forwarding failed", "method", r.Method, "path", r.URL.Path, "error", err)
			panic(http.ErrAbortHandler)
		},
	}
	return p
}

// Inject adds a fault; faults are tried in the order they were added, and
// the first that matches a request applies to it.
func (p *Proxy) Inject(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, &f)
}

// Clear removes every fault not yet used up, and ends the delays under
// way: their requests are forwarded now.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
	close(p.cleared)
	p.cleared = make(chan struct{})
}

// Injected is how many requests got a fault of kind k.
func (p *Proxy) Injected(k Kind) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.injected[k]
}

// Requests is how many requests the proxy has received.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen
}

// take returns the fault for r, if any, counting it.
func (p *Proxy) take(r *http.Request) (*Fault, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen++
	close(p.notify)
	p.notify = make(chan struct{})
	for i, f := range p.faults {
		if f.Match != nil && !f.Match(r) {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				p.faults = append(p.faults[:i:i], p.faults[i+1:]...)
			}
		}
		p.injected[f.Kind]++
		return f, p.cleared
	}
	return nil, nil
}

// WaitRequests blocks until the proxy has received at least n requests, or
// timeout passes; it reports whether it has.
func (p *Proxy) WaitRequests(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		seen, ch := p.seen, p.notify
		p.mu.Unlock()
		if seen >= n {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// ServeHTTP applies the request's fault, if any, then forwards it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, cleared := p.take(r)
	if f == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.logger.Debug("injecting a fault", "kind", f.Kind.String(), "method", r.Method, "path", r.URL.Path)
	switch f.Kind {
	case SlowDown:
		slowDown(w, r)
	case ResetBody:
		resetBody(w, r, f.ResetAfter, p.logger)
	case Delay:
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-cleared:
		case <-r.Context().Done():
			return
		}
		p.rp.ServeHTTP(w, r)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// slowDown answers as S3 does when asked to slow down.
func slowDown(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>`+
		`<Resource>%s</Resource><RequestId>s3fault</RequestId></Error>`, r.URL.Path)
}

// resetBody reads n bytes of the body, then closes the connection with a
// TCP RST (SO_LINGER 0), so the client's upload fails midway.
func resetBody(w http.ResponseWriter, r *http.Request, n int64, logger hclog.Logger) {
	if _, err := io.CopyN(io.Discard, r.Body, n); err != nil && !errors.Is(err, io.EOF) {
		logger.Debug("reading the body before the reset", "error", err)
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

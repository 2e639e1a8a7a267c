package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrNotLoopback is returned for a metrics address off the loopback
// interface without the explicit opt-in.
var ErrNotLoopback = errors.New("metrics_address must be a loopback address (127.0.0.1 or [::1]); set metrics_allow_remote = true to serve elsewhere")

// CheckAddress validates a plugin's metrics_address: host:port, and
// loopback unless allowRemote.
func CheckAddress(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics_address %q: want host:port: %w", addr, err)
	}
	if port == "" {
		return fmt.Errorf("metrics_address %q: no port", addr)
	}
	if allowRemote {
		return nil
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("metrics_address %q: %w", addr, ErrNotLoopback)
}

// Server serves a registry at /metrics until Close.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Serve listens on addr and serves reg at /metrics in the background.
func Serve(addr string, reg *prometheus.Registry, log hclog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics_address %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: errorLog{log}}))
	s := &Server{ln: ln, srv: &http.Server{
		Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 90 * time.Second,
	}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "error", err)
		}
	}()
	log.Info("serving metrics", "address", ln.Addr().String())
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

type errorLog struct{ log hclog.Logger }

func (e errorLog) Println(v ...any) { e.log.Warn("metrics: " + fmt.Sprint(v...)) }

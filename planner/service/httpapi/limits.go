package httpapi

import (
	"net/http"
	"time"
)

// Limits bound what one client can hold of the planner's HTTP server: every
// task in the cluster can reach it, so a slow, idle or oversized client must
// not pin connections, goroutines or memory.
type Limits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// MaxBodyBytes caps every request body (a progress sample is far
	// smaller; its handler caps it again at progress.MaxBody).
	MaxBodyBytes int64
}

// DefaultLimits are the planner's production limits.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second,
		IdleTimeout: 90 * time.Second, MaxHeaderBytes: 64 << 10, MaxBodyBytes: 1 << 20,
	}
}

// HTTPServer returns an http.Server for the API with the limits applied.
func (s *Server) HTTPServer(l Limits) *http.Server {
	h := s.Handler()
	return &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, l.MaxBodyBytes)
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

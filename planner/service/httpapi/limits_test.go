package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func serveWithLimits(t *testing.T, l Limits, progress http.Handler) string {
	t.Helper()
	s := &Server{ID: "p", Rounds: rounds{}, Leader: follower{}, Source: snap{}, Progress: progress}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	srv := s.HTTPServer(l)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// closedWithin reports whether the server closes conn within d.
func closedWithin(conn net.Conn, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	return err == nil // EOF from the server; a deadline error means it kept the connection
}

func TestHTTPServer_DropsSilentAndIdleClients(t *testing.T) {
	l := DefaultLimits()
	l.ReadHeaderTimeout, l.IdleTimeout = 200*time.Millisecond, 300*time.Millisecond
	addr := serveWithLimits(t, l, http.NotFoundHandler())

	// A client that connects and says nothing.
	silent, err := net.Dial("tcp", addr)
	must.NoError(t, err)
	defer silent.Close()
	must.True(t, closedWithin(silent, 5*time.Second), must.Sprint("a silent connection must be closed"))

	// A client that makes one keep-alive request and then idles.
	idle, err := net.Dial("tcp", addr)
	must.NoError(t, err)
	defer idle.Close()
	_, err = io.WriteString(idle, "GET /v1/health HTTP/1.1\r\nHost: p\r\n\r\n")
	must.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	must.NoError(t, err)
	must.Eq(t, 200, resp.StatusCode)
	resp.Body.Close()
	must.True(t, closedWithin(idle, 5*time.Second), must.Sprint("an idle keep-alive connection must be closed"))
}

func TestHTTPServer_CapsBodies(t *testing.T) {
	l := DefaultLimits()
	l.MaxBodyBytes = 1024
	var readErr error
	addr := serveWithLimits(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, readErr = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	}))
	resp, err := http.Post("http://"+addr+"/v1/progress", "application/json", strings.NewReader(strings.Repeat("x", 1<<20)))
	must.NoError(t, err)
	resp.Body.Close()
	var mbe *http.MaxBytesError
	must.ErrorAs(t, readErr, &mbe)
}

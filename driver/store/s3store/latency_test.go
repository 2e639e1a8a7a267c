package s3store

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// benchRTT is the round trip BenchmarkS3 adds between client and server
// ($CARAVAN_S3_BENCH_RTT, a Go duration; none when unset).
func benchRTT(tb testing.TB) time.Duration {
	v := os.Getenv("CARAVAN_S3_BENCH_RTT")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	must.NoError(tb, err)
	return d
}

// latencyProxy listens on loopback and forwards each connection to target,
// delivering every byte, either way, rtt/2 after it arrived: a remote
// server's round trip (each request's, and each wait for 100-continue),
// with the bandwidth of loopback. It returns the proxy's host:port.
func latencyProxy(tb testing.TB, target string, rtt time.Duration) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(tb, err)
	tb.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				u, err := net.Dial("tcp", target)
				if err != nil {
					_ = c.Close()
					return
				}
				done := make(chan struct{})
				go func() {
					delayCopy(u, c, rtt/2)
					close(done)
				}()
				delayCopy(c, u, rtt/2)
				<-done
				_ = c.Close()
				_ = u.Close()
			}()
		}
	}()
	return l.Addr().String()
}

// delayCopy copies src to dst, writing each piece d after it was read,
// and closes dst for writing when src ends.
func delayCopy(dst, src net.Conn, d time.Duration) {
	type piece struct {
		at time.Time
		b  []byte
	}
	q := make(chan piece, 4096)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 64<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- piece{time.Now().Add(d), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for p := range q {
		time.Sleep(time.Until(p.at))
		if _, err := dst.Write(p.b); err != nil {
			_ = src.Close()
			for range q {
			}
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

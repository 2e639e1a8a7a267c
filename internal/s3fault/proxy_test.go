package s3fault

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// backend records what reaches the server behind the proxy.
type backend struct {
	mu    sync.Mutex
	got   []string // "METHOD path host len(body)"
	bytes [][]byte
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.got = append(b.got, r.Method+" "+r.URL.Path+" "+r.Host)
	b.bytes = append(b.bytes, body)
	b.mu.Unlock()
	w.Header().Set("ETag", `"etag"`)
	_, _ = w.Write([]byte("ok:" + r.URL.Path))
}

func (b *backend) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...)
}

func setup(t *testing.T) (*Proxy, *httptest.Server, *backend) {
	t.Helper()
	be := &backend{}
	srv := httptest.NewServer(be)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	must.NoError(t, err)
	p := New(u, hclog.NewNullLogger())
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	return p, front, be
}

func put(t *testing.T, base, path string, body []byte) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, base+path, bytes.NewReader(body))
	must.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

func TestProxy_PassesThroughWithTheClientsHost(t *testing.T) {
	p, front, be := setup(t)
	body := bytes.Repeat([]byte("x"), 1<<20)
	resp, err := put(t, front.URL, "/bucket/key", body)
	must.NoError(t, err)
	must.Eq(t, http.StatusOK, resp.StatusCode)
	got, _ := io.ReadAll(resp.Body)
	must.Eq(t, "ok:/bucket/key", string(got))

	host := strings.TrimPrefix(front.URL, "http://")
	must.Eq(t, []string{"PUT /bucket/key " + host}, be.requests())
	must.Eq(t, body, be.bytes[0])
	must.Eq(t, 1, p.Requests())
	must.Zero(t, p.Injected(SlowDown)+p.Injected(ResetBody)+p.Injected(Delay))
}

func TestProxy_SlowDown(t *testing.T) {
	p, front, be := setup(t)
	p.Inject(Fault{Kind: SlowDown, Match: Uploads, Times: 2})

	// A GET does not match; two PUTs get 503, the third passes.
	resp, err := http.Get(front.URL + "/bucket/key")
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, http.StatusOK, resp.StatusCode)
	for i := 0; i < 2; i++ {
		resp, err := put(t, front.URL, "/bucket/key", []byte("data"))
		must.NoError(t, err)
		must.Eq(t, http.StatusServiceUnavailable, resp.StatusCode)
		body, _ := io.ReadAll(resp.Body)
		must.StrContains(t, string(body), "<Code>SlowDown</Code>")
	}
	resp, err = put(t, front.URL, "/bucket/key", []byte("data"))
	must.NoError(t, err)
	must.Eq(t, http.StatusOK, resp.StatusCode)

	must.Eq(t, 2, p.Injected(SlowDown))
	must.Eq(t, []string{"GET", "PUT"}, methods(be.requests()))
}

func methods(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, strings.Fields(r)[0])
	}
	return out
}

func TestProxy_ResetMidBody(t *testing.T) {
	p, front, be := setup(t)
	p.Inject(Fault{Kind: ResetBody, Match: Uploads, Times: 1, ResetAfter: 64 << 10})

	// The client writes 8 MiB; the proxy cuts it off after 64 KiB.
	_, err := put(t, front.URL, "/bucket/big", bytes.Repeat([]byte("y"), 8<<20))
	must.Error(t, err)
	must.Eq(t, 1, p.Injected(ResetBody))
	must.SliceEmpty(t, be.requests(), must.Sprint("a cut-off upload reached the server"))

	// The fault was used up: the retry gets through whole.
	resp, err := put(t, front.URL, "/bucket/big", bytes.Repeat([]byte("y"), 8<<20))
	must.NoError(t, err)
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.Eq(t, 8<<20, len(be.bytes[0]))
}

func TestProxy_DelayUntilCleared(t *testing.T) {
	p, front, be := setup(t)
	p.Inject(Fault{Kind: Delay, Delay: time.Hour})

	// A delayed request is still waiting when the client gives up.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/bucket/k", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	must.True(t, p.WaitRequests(1, 10*time.Second))
	select {
	case err := <-done:
		t.Fatalf("the delayed request finished: %v", err)
	default:
	}
	cancel()
	must.ErrorIs(t, <-done, context.Canceled)
	must.SliceEmpty(t, be.requests())

	// Clear ends an unlimited fault.
	p.Clear()
	resp, err := http.Get(front.URL + "/bucket/k")
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.Eq(t, 1, p.Injected(Delay))
}

func TestProxy_ClearEndsADelayUnderWay(t *testing.T) {
	p, front, be := setup(t)
	p.Inject(Fault{Kind: Delay, Match: Uploads, Delay: time.Hour})
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPut, front.URL+"/bucket/k", strings.NewReader("held"))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	must.True(t, p.WaitRequests(1, 10*time.Second))
	p.Clear()
	must.NoError(t, <-done)
	must.Eq(t, []byte("held"), be.bytes[0])
}

func TestProxy_ShortDelayForwards(t *testing.T) {
	p, front, be := setup(t)
	p.Inject(Fault{Kind: Delay, Delay: 10 * time.Millisecond, Times: 1})
	resp, err := http.Get(front.URL + "/bucket/k")
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.SliceLen(t, 1, be.requests())
}

func TestProxy_UnreachableServerDropsTheConnection(t *testing.T) {
	_, front, _ := setup(t)
	down := httptest.NewServer(http.NotFoundHandler())
	u, err := url.Parse(down.URL)
	must.NoError(t, err)
	down.Close()
	p := New(u, hclog.NewNullLogger())
	front.Config.Handler = p

	_, err = put(t, front.URL, "/bucket/key", []byte("data"))
	must.Error(t, err, must.Sprint("a stopped server answered through the proxy"))
	must.Eq(t, 1, p.Requests())
}

func TestUploads(t *testing.T) {
	cases := []struct {
		method, path string
		want         bool
	}{
		{http.MethodPut, "/bucket/key", true},
		{http.MethodPut, "/bucket/a/b/c?partNumber=1&uploadId=x", true},
		{http.MethodPut, "/bucket", false},
		{http.MethodGet, "/bucket/key", false},
		{http.MethodPost, "/bucket/key?uploads", false},
	}
	for _, tc := range cases {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			must.Eq(t, tc.want, Uploads(r))
		})
	}
}

func TestKind_String(t *testing.T) {
	must.Eq(t, "slow_down", SlowDown.String())
	must.Eq(t, "reset_body", ResetBody.String())
	must.Eq(t, "delay", Delay.String())
	must.Eq(t, "kind(9)", Kind(9).String())
}

package s3fault

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// control serves p's control endpoint and returns a client for it.
func control(t *testing.T, p *Proxy) Client {
	t.Helper()
	srv := httptest.NewServer(p.Control())
	t.Cleanup(srv.Close)
	return Client{URL: srv.URL}
}

func TestControl_InjectStatsClear(t *testing.T) {
	p, front, be := setup(t)
	c := control(t, p)

	// Chunks get 503 twice; a manifest PUT and a GET pass.
	must.NoError(t, c.Inject(Spec{Kind: "slow_down", Method: "put", PathContains: "/chunks/", Times: 2}))
	st, err := c.Stats()
	must.NoError(t, err)
	must.Eq(t, 1, st.Active)
	for _, path := range []string{"/b/p/chunks/ab/abcd", "/b/p/keys/k/gen-1.json", "/b/p/chunks/ab/abcd"} {
		resp, err := put(t, front.URL, path, []byte("x"))
		must.NoError(t, err)
		want := http.StatusServiceUnavailable
		if path != "/b/p/chunks/ab/abcd" {
			want = http.StatusOK
		}
		must.Eq(t, want, resp.StatusCode, must.Sprint(path))
	}
	resp, err := http.Get(front.URL + "/b/p/chunks/ab/abcd")
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, http.StatusOK, resp.StatusCode)

	st, err = c.Stats()
	must.NoError(t, err)
	must.Eq(t, Stats{Requests: 4, Injected: map[string]int{"slow_down": 2}, Active: 0}, st)
	must.SliceLen(t, 2, be.requests())

	// An unlimited fault stays until cleared.
	must.NoError(t, c.Inject(Spec{Kind: "reset_body", ResetAfter: 1}))
	_, err = put(t, front.URL, "/b/p/chunks/cd/cdef", []byte("data"))
	must.Error(t, err)
	must.NoError(t, c.Clear())
	resp, err = put(t, front.URL, "/b/p/chunks/cd/cdef", []byte("data"))
	must.NoError(t, err)
	must.Eq(t, http.StatusOK, resp.StatusCode)
	st, err = c.Stats()
	must.NoError(t, err)
	must.Eq(t, 1, st.Injected["reset_body"])
	must.Zero(t, st.Active)
}

func TestControl_BadSpecNamesTheField(t *testing.T) {
	p, _, _ := setup(t)
	c := control(t, p)
	cases := []struct {
		name string
		spec Spec
		want string
	}{
		{"unknown kind", Spec{Kind: "explode"}, `kind: "explode" is not`},
		{"negative times", Spec{Kind: "slow_down", Times: -1}, "times: -1 is negative"},
		{"no delay", Spec{Kind: "delay"}, `delay: "" is not a positive duration`},
		{"bad delay", Spec{Kind: "delay", Delay: "soon"}, `delay: "soon"`},
		{"negative reset_after", Spec{Kind: "reset_body", ResetAfter: -5}, "reset_after: -5 is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Inject(tc.spec)
			must.ErrorContains(t, err, "HTTP 400")
			must.ErrorContains(t, err, tc.want)
		})
	}
	st, err := c.Stats()
	must.NoError(t, err)
	must.Zero(t, st.Active)

	// Unknown JSON fields are refused too.
	resp, err := http.Post(c.URL+"/faults", "application/json", strings.NewReader(`{"kind":"slow_down","tims":3}`))
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, http.StatusBadRequest, resp.StatusCode)
}

package progress

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/shoenig/test/must"
)

// planner is a stand-in for the planner's handler: it decodes with Decode
// and answers like the planner does.
type planner struct {
	mu   sync.Mutex
	got  []Sample
	auth []string
}

func (p *planner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s, err := Decode(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(ErrorBody{Error: err.Error()})
		return
	}
	p.mu.Lock()
	p.got = append(p.got, s)
	p.auth = append(p.auth, r.Header.Get("Authorization"))
	p.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func TestClient_ReportsToEveryPlanner(t *testing.T) {
	p1, p2 := &planner{}, &planner{}
	s1, s2 := httptest.NewServer(p1), httptest.NewServer(p2)
	defer s1.Close()
	defer s2.Close()
	c := &Client{URLs: func() []string { return []string{s1.URL, s2.URL + Path} }, Token: func() string { return "jwt" }}
	s := Sample{Step: 7, Loss: 0.25, SamplesPerSec: 100, Workers: 2, PS: 1, StepsTotal: 10, GradSqr: 1, GradVar: 2}
	must.NoError(t, c.Report(context.Background(), s))
	for _, p := range []*planner{p1, p2} {
		must.Eq(t, []Sample{s}, p.got)
		must.Eq(t, []string{"Bearer jwt"}, p.auth)
	}
}

func TestClient_Errors(t *testing.T) {
	p := &planner{}
	srv := httptest.NewServer(p)
	defer srv.Close()
	ctx := context.Background()
	c := &Client{URLs: func() []string { return nil }, Token: func() string { return "jwt" }}
	must.ErrorIs(t, c.Report(ctx, Sample{}), ErrNoURL)
	c = &Client{URLs: func() []string { return []string{srv.URL} }, Token: func() string { return "" }}
	must.ErrorIs(t, c.Report(ctx, Sample{}), ErrNoToken)
	c = &Client{URLs: func() []string { return []string{srv.URL} }, Token: func() string { return "jwt" }}
	// Refused locally before sending: the planner never sees it.
	must.ErrorIs(t, c.Report(ctx, Sample{Loss: -1}), ErrBadSample)
	must.SliceEmpty(t, p.got)
	// An unreachable planner is an error, never a panic or a hang.
	srv.Close()
	err := c.Report(ctx, Sample{Step: 1})
	must.Error(t, err)
}

func TestReport_RejectedIsErrRejected(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(ErrorBody{Error: "bad token"})
	}))
	defer srv.Close()
	err := Report(context.Background(), nil, srv.URL, "x", Sample{Step: 1, Loss: 1})
	must.ErrorIs(t, err, ErrRejected)
	must.StrContains(t, err.Error(), "bad token")
}

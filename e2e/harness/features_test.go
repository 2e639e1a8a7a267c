package harness

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/shoenig/test/must"
)

// JWKS is detected by the agent's answer (404 on Nomad 1.6), and a test
// needing a missing feature skips naming it.
func TestHasFeature_JWKS(t *testing.T) {
	for _, tc := range []struct {
		code int
		has  bool
	}{{200, true}, {404, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			must.Eq(t, "/.well-known/jwks.json", r.URL.Path)
			w.WriteHeader(tc.code)
		}))
		c := &C{NomadAddr: srv.URL}
		has, err := c.HasFeature(t, FeatureJWKS)
		must.NoError(t, err)
		must.Eq(t, tc.has, has)
		srv.Close()
		has, err = c.HasFeature(t, FeatureJWKS) // kept: no second request
		must.NoError(t, err)
		must.Eq(t, tc.has, has)
	}
}

func TestNeedsFeature_Skips(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	c := &C{NomadAddr: srv.URL}
	var out bytes.Buffer
	skipOut = &out
	defer func() { skipOut = os.Stdout }()
	var skipped bool
	t.Run("needs-jwks", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		NeedsFeature(t, c, FeatureJWKS)
	})
	must.True(t, skipped)
	must.Eq(t, "SKIP-NEEDS-FEATURE: TestNeedsFeature_Skips/needs-jwks: JWKS at /.well-known/jwks.json\n", out.String())

	out.Reset()
	t.Run("covered", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		NeedsFeature(t, c, FeatureJWKS, "planner/service TestAgent_X", "TestY")
	})
	must.True(t, skipped)
	must.Eq(t, "SKIP-NEEDS-FEATURE: TestNeedsFeature_Skips/covered: JWKS at /.well-known/jwks.json; "+
		"covered without it by planner/service TestAgent_X, TestY\n", out.String())
}

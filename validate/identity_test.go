package validate

import (
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

// TestValidate_IdentityKinds: caravan validate accepts both kinds of
// workload identity block: the default identity the shipped jobspecs use
// (every Nomad; the only kind a 1.6 CLI parses) and a named identity with
// name, aud and ttl, which Nomad 1.7 and later accept.
func TestValidate_IdentityKinds(t *testing.T) {
	spec := filepath.Join(repoRoot(t), "e2e", "adversarial", "testdata", "planner-identity.nomad.hcl")
	for _, tc := range []struct {
		name string
		vars []string
	}{
		{"default identity", []string{"name=id-default"}},
		{"named identity with ttl", []string{"name=id-named", "named=true", "ttl=1h"}},
		{"named identity without ttl", []string{"name=id-forever", "named=true", "ttl="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must.SliceEmpty(t, File(spec, Vars{Args: tc.vars, Strict: true}))
		})
	}
}

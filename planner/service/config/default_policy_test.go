package config

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// repoFile reads a file of the repository from this package's directory.
func repoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", rel))
	must.NoError(t, err)
	return b
}

// jobspecPolicyDefault is the default of jobspecs/planner.nomad.hcl's
// "policy" variable.
func jobspecPolicyDefault(t *testing.T) string {
	t.Helper()
	const path = "jobspecs/planner.nomad.hcl"
	f, diags := hclsyntax.ParseConfig(repoFile(t, path), path, hcl.InitialPos)
	must.False(t, diags.HasErrors(), must.Sprint(diags))
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "variable" || len(b.Labels) != 1 || b.Labels[0] != "policy" {
			continue
		}
		attr, ok := b.Body.Attributes["default"]
		must.True(t, ok, must.Sprint("the policy variable has no default"))
		v, diags := attr.Expr.Value(nil)
		must.False(t, diags.HasErrors(), must.Sprint(diags))
		return v.AsString()
	}
	t.Fatalf("%s has no policy variable", path)
	return ""
}

// TestDefaultPolicy_DocsJobspecAndServiceAgree: the service's default policy,
// the planner jobspec's default, and every statement of the default in the
// docs name the same policy (they once differed: the docs said goodput while
// the service and the jobspec ran optimus).
func TestDefaultPolicy_DocsJobspecAndServiceAgree(t *testing.T) {
	want := Default().Policy.Name
	must.Eq(t, policy.Best, want)
	_, err := policy.New(want)
	must.NoError(t, err)
	must.Eq(t, want, jobspecPolicyDefault(t), must.Sprint("jobspecs/planner.nomad.hcl"))

	statement := regexp.MustCompile("(?i)the default policy is \\**`([a-z-]+)`")
	markers := []*regexp.Regexp{
		regexp.MustCompile("\\*\\*([a-z-]+) \\(default\\)\\*\\*"),                    // | **goodput (default)** |
		regexp.MustCompile("\\*\\*([a-z-]+)\\*\\* \\((?:[a-z]+, )?(?:the )?default"), // **goodput** (default) / (ours, default) / (the default, ...)
		regexp.MustCompile("`([a-z-]+)` \\(default\\)"),                              // `goodput` (default)
		regexp.MustCompile("the default `([a-z-]+)`"),
	}
	for _, doc := range []string{"README.md", "planner/README.md", "planner/POLICY.md"} {
		text := repoFile(t, doc)
		m := statement.FindSubmatch(text)
		must.NotNil(t, m, must.Sprintf("%s does not say \"The default policy is `...`\"", doc))
		must.Eq(t, want, string(m[1]), must.Sprint(doc))
		for _, re := range markers {
			for _, m := range re.FindAllSubmatch(text, -1) {
				if len(m) > 1 {
					must.Eq(t, want, string(m[1]), must.Sprintf("%s: %q", doc, m[0]))
				}
			}
		}
	}
	// The configuration example in planner/README.md shows the default.
	example := regexp.MustCompile(`(?m)^policy \{\n\s+name\s+=\s+"([a-z-]+)"`).FindSubmatch(repoFile(t, "planner/README.md"))
	must.NotNil(t, example)
	must.Eq(t, want, string(example[1]), must.Sprint("planner/README.md's configuration example"))
}

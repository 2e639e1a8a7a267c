// Package jobspecs checks that every jobspec under jobspecs/ is accepted by
// the cluster's Nomad (`nomad job validate`) and by `caravan validate`,
// under each value of a jobspec's driver variable, so none rots. Each is
// also run end to end by the e2e package of its area (cluster, device,
// driver, planner, ui).
package jobspecs

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

var declared = regexp.MustCompile(`(?m)^variable "([a-z_]+)"`)

func TestJobspecs_Validate(t *testing.T) {
	c := harness.Cluster(t)
	// Values for the variables that have no default.
	required := map[string]string{
		"caravan_bin": c.Bin,
		"state_dir":   c.CheckpointDir,
	}
	files, err := filepath.Glob(filepath.Join(c.Root, "jobspecs", "*.nomad.hcl"))
	must.NoError(t, err)
	must.SliceNotEmpty(t, files)
	for _, f := range files {
		src, err := os.ReadFile(f)
		must.NoError(t, err)
		args := []string{"job", "validate"}
		for _, m := range declared.FindAllStringSubmatch(string(src), -1) {
			if v, ok := required[m[1]]; ok {
				args = append(args, "-var", m[1]+"="+v)
			}
		}
		// A jobspec with a driver variable, under each driver it allows.
		runs := map[string][]string{filepath.Base(f): args}
		for _, d := range drivers(t, f) {
			runs[filepath.Base(f)+" driver="+d] = append(slices.Clone(args), "-var", "driver="+d)
		}
		for _, name := range slices.Sorted(maps.Keys(runs)) {
			t.Run(name, func(t *testing.T) {
				out, err := c.CLI(t, append(runs[name], f)...)
				must.NoError(t, err, must.Sprint(out))
				// caravan's own checks (role tasks against their group
				// among them), which validate/ runs on the
				// default variables only.
				vout, err := exec.Command(c.Bin, append(append([]string{"validate"}, runs[name][2:]...), f)...).CombinedOutput()
				must.NoError(t, err, must.Sprintf("caravan validate: %s", vout))
			})
		}
	}
}

// TestJobspecs_AgentSnippets checks the client agent snippets for the
// plugins with `nomad config validate`.
func TestJobspecs_AgentSnippets(t *testing.T) {
	c := harness.Cluster(t)
	files, err := filepath.Glob(filepath.Join(c.Root, "jobspecs", "agent", "*.hcl"))
	must.NoError(t, err)
	must.SliceNotEmpty(t, files)
	for _, f := range files {
		out, err := c.CLI(t, "config", "validate", f)
		must.NoError(t, err, must.Sprint(out))
	}
}

package jobspecs

import (
	"os"
	"testing"

	"github.com/shoenig/test/must"
)

// hostOnlyVariables are the host-process jobspecs' variables a container
// version has no use for: where the binaries or the interpreter live on the
// clients (the image holds them), the caravan driver's periodic checkpoint
// interval (containers checkpoint on their kill signal), and worker
// processes per allocation (one per container).
var hostOnlyVariables = map[string]bool{
	"caravan_bin": true, "caravan_python": true, "python": true,
	"checkpoint_interval": true, "nproc_per_node": true,
}

// TestJobspecs_ContainerVersionsKeepTheHostVariables: the docker version of
// each elastic jobspec declares every variable of its host-process version
// but the host-only ones, so a user switching to a container keeps every
// knob, the GPU request the planner counts a worker by among them (the
// PyTorch container job had no gpu_shares: the planner counted its workers
// as holding no GPU). Needs no cluster.
func TestJobspecs_ContainerVersionsKeepTheHostVariables(t *testing.T) {
	for _, name := range []string{"train-elastic", "train-pytorch-elastic"} {
		t.Run(name, func(t *testing.T) {
			read := func(path string) map[string]bool {
				t.Helper()
				b, err := os.ReadFile(path)
				must.NoError(t, err)
				vars := map[string]bool{}
				for _, m := range declared.FindAllStringSubmatch(string(b), -1) {
					vars[m[1]] = true
				}
				return vars
			}
			host := read("../../jobspecs/" + name + ".nomad.hcl")
			docker := read("../../jobspecs/" + name + "-docker.nomad.hcl")
			for v := range host {
				if !hostOnlyVariables[v] {
					must.True(t, docker[v], must.Sprintf("%s-docker.nomad.hcl does not declare variable %q of %s.nomad.hcl", name, v, name))
				}
			}
		})
	}
}

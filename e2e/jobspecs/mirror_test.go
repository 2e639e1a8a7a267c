package jobspecs

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// podmanDriver matches a task's driver line in a podman jobspec.
var podmanDriver = regexp.MustCompile(`driver(\s*)= "podman"`)

// body returns a jobspec's text past its header comment (from its first
// variable on).
func body(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	s := string(b)
	i := strings.Index(s, "\nvariable ")
	must.Positive(t, i, must.Sprintf("%s has no variable", path))
	return s[i:]
}

// TestJobspecs_PodmanMirrorsDocker: each shipped podman jobspec differs
// from its docker version only in its name and its container tasks' driver
// lines, so a fix to one reaches the other. The docker versions run on the
// local cluster (e2e/containers, under dockerd and under podman's Docker
// API); the podman versions, for users who install Nomad's podman driver
// plugin themselves, are not run here (README.md), so this keeps them in
// step. Needs no cluster.
func TestJobspecs_PodmanMirrorsDocker(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drivers int
	}{
		{"train", 1},
		{"train-elastic", 2},
		{"train-pytorch-elastic", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docker := body(t, "../../jobspecs/"+tc.name+"-docker.nomad.hcl")
			podman := body(t, "../../jobspecs/"+tc.name+"-podman.nomad.hcl")
			must.Eq(t, tc.drivers, len(podmanDriver.FindAllString(podman, -1)),
				must.Sprint("the container tasks run under podman"))
			mirrored := strings.ReplaceAll(podman, tc.name+"-podman", tc.name+"-docker")
			mirrored = podmanDriver.ReplaceAllString(mirrored, `driver${1}= "docker"`)
			must.Eq(t, docker, mirrored)
		})
	}
}

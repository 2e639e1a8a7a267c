package jobspecs

import (
	"os"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// groups returns a jobspec's text from its first group on.
func groups(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	s := string(b)
	i := strings.Index(s, "\n  group ")
	must.Positive(t, i, must.Sprintf("%s has no group", path))
	return s[i:]
}

// TestJobspecs_PodmanMirrorsDocker: the podman version of the elastic
// container job (which cannot run here: the podman driver plugin cannot be
// built) differs from the docker version, which the e2e tests run, only in
// its driver lines. Needs no cluster.
func TestJobspecs_PodmanMirrorsDocker(t *testing.T) {
	docker := groups(t, "../../jobspecs/train-elastic-docker.nomad.hcl")
	podman := groups(t, "../../jobspecs/train-elastic-podman.nomad.hcl")
	must.StrContains(t, podman, `driver       = "podman"`)
	must.Eq(t, docker, strings.ReplaceAll(podman, `driver       = "podman"`, `driver       = "docker"`))
}

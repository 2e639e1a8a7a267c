package jobspecs

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// TestJobspecs_PyTorchPodmanMirrorsDocker: the podman version of the
// elastic PyTorch container job (which cannot run here: the podman driver
// plugin cannot be built) differs from the docker version, which the e2e
// tests run, only in its name and its driver lines. Needs no cluster.
func TestJobspecs_PyTorchPodmanMirrorsDocker(t *testing.T) {
	body := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		must.NoError(t, err)
		s := string(b)
		i := strings.Index(s, "\nvariable ")
		must.Positive(t, i, must.Sprintf("%s has no variable", path))
		return s[i:] // past the header comment
	}
	docker := body("../../jobspecs/train-pytorch-elastic-docker.nomad.hcl")
	podman := body("../../jobspecs/train-pytorch-elastic-podman.nomad.hcl")
	drivers := regexp.MustCompile(`driver(\s*)= "podman"`)
	must.Eq(t, 2, len(drivers.FindAllString(podman, -1)), must.Sprint("want the store and train tasks under podman"))
	mirrored := drivers.ReplaceAllString(strings.ReplaceAll(podman, "train-pytorch-elastic-podman", "train-pytorch-elastic-docker"),
		`driver${1}= "docker"`)
	must.Eq(t, docker, mirrored)
}

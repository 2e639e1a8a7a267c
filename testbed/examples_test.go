package testbed

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/internal/cli"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux/polluxtest"
)

// TestUsageExamples: every example of `caravan testbed --help` parses as
// written from the repository root, the --dry-run one runs, and every
// repository path the text names exists (make targets: the README test at
// the root checks those).
func TestUsageExamples(t *testing.T) {
	polluxtest.Dir(t)
	root, err := filepath.Abs("..")
	must.NoError(t, err)
	t.Chdir(root)
	exs := cli.Examples(usage, "caravan testbed")
	must.SliceNotEmpty(t, exs)
	for _, ex := range exs {
		t.Run(ex.Line, func(t *testing.T) {
			args := make([]string, len(ex.Args))
			for i, a := range ex.Args {
				args[i] = os.ExpandEnv(a)
			}
			if !slices.Contains(args, "--dry-run") {
				_, err := parse(args, &bytes.Buffer{})
				must.NoError(t, err)
				return
			}
			var out, errOut bytes.Buffer
			must.NoError(t, run(context.Background(), args, &out, &errOut), must.Sprint(errOut.String()))
		})
	}
	for _, f := range strings.Fields(usage) {
		f = strings.Trim(f, "(),.`")
		if strings.HasPrefix(f, "jobspecs/") || strings.HasPrefix(f, "testbed/") {
			must.FileExists(t, filepath.Join(root, f))
		}
	}
}

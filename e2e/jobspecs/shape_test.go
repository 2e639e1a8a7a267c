package jobspecs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// TestJobspecs_IDHasName: a shipped jobspec that takes its job ID from a
// variable sets the job's name from it too, so several jobs of one jobspec
// (the demo's elastic-a, -b and -c) have distinct names in the Nomad UI,
// not the job block's label. Needs no cluster.
func TestJobspecs_IDHasName(t *testing.T) {
	files, err := filepath.Glob("../../jobspecs/*.nomad.hcl")
	must.NoError(t, err)
	must.SliceNotEmpty(t, files)
	id := regexp.MustCompile(`(?m)^  id\s*=\s*(\S+)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		must.NoError(t, err)
		m := id.FindStringSubmatch(string(b))
		if m == nil {
			continue
		}
		name := regexp.MustCompile(`(?m)^  name\s*=\s*` + regexp.QuoteMeta(m[1]) + `\b`)
		must.True(t, name.Match(b), must.Sprintf("%s sets id = %s but not name = %s", f, m[1], m[1]))
	}
}

// TestJobspecs_CheckpointingJobsRescheduleUnlimited: every shipped jobspec
// with a caravan checkpoint (a checkpoint block or a checkpoint role task)
// has a reschedule block, and sets each to unlimited = true, as README.md's operating
// notes advise and the driver's warning asks: Nomad counts `nomad alloc
// stop` and preemptions as reschedules. Needs no cluster.
func TestJobspecs_CheckpointingJobsRescheduleUnlimited(t *testing.T) {
	files, err := filepath.Glob("../../jobspecs/*.nomad.hcl")
	must.NoError(t, err)
	block := regexp.MustCompile(`(?s)reschedule \{(.*?)\}`)
	unlimited := regexp.MustCompile(`unlimited\s*=\s*true`)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		must.NoError(t, err)
		s := string(b)
		if !regexp.MustCompile(`checkpoint\s*(=\s*)?\{`).MatchString(s) || !strings.Contains(s, `driver`) {
			continue
		}
		blocks := block.FindAllStringSubmatch(s, -1)
		must.SliceNotEmpty(t, blocks, must.Sprintf("%s checkpoints but has no reschedule block (a batch job's default allows one move in 24 h)", f))
		for _, m := range blocks {
			must.True(t, unlimited.MatchString(m[1]), must.Sprintf("%s: reschedule {%s}", f, m[1]))
			checked++
		}
	}
	must.Greater(t, 5, checked)
}

package validate

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

// TestValidate_CheckpointMount: a volume or mount over a role task's
// checkpoint directory (or above it) is refused by each role task that
// serves it (the driver's own check at start, checkRole), naming the group,
// the task and the mount; a mount beside it is not.
func TestValidate_CheckpointMount(t *testing.T) {
	var out, errOut bytes.Buffer
	file := filepath.Join("testdata", "bad-checkpoint-mount.nomad.hcl")
	code := Run([]string{file}, &out, &errOut, nil)
	must.Eq(t, 1, code, must.Sprint(errOut.String()))
	got := out.String()
	must.StrContains(t, got, file+": 3 errors")
	must.StrContains(t, got, `error: group "train" task "restore" config: checkpoint.dir: a mount covers the checkpoint directory: task "trainer" has volumes entry "local/ckpt-bind:${NOMAD_ALLOC_DIR}/checkpoint" at /alloc/checkpoint, over its checkpoint directory /alloc/checkpoint`)
	must.StrContains(t, got, `error: group "train" task "commit" config: checkpoint.dir: a mount covers the checkpoint directory: task "trainer" has volumes entry "local/ckpt-bind:${NOMAD_ALLOC_DIR}/checkpoint" at /alloc/checkpoint`)
	must.StrContains(t, got, `error: group "other" task "commit" config: checkpoint.dir: a mount covers the checkpoint directory: task "ps" has mount block (source "local/state") at /alloc, over its checkpoint directory /alloc/state/ps`)
}

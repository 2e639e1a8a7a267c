package harness

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// LoadImages builds the named container images (all without names; cached
// under build/images: scripts/build-images.sh) and loads build/images/ into
// the cluster's dockerd and podman (an image a runtime already holds is
// skipped).
func (c *C) LoadImages(t testing.TB, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		append([]string{filepath.Join(c.Root, "scripts", "build-images.sh")}, names...),
		{filepath.Join(c.Root, "scripts", "cluster.sh"), "images"},
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = c.Root
		cmd.Env = append(os.Environ(), "CARAVAN_CLUSTER_DIR="+c.Dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		must.NoError(t, cmd.Run(), must.Sprintf("%s: %s", strings.Join(args, " "), out.String()))
	}
}

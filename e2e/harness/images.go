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
)

// LoadImages builds the container images (scripts/build-images.sh, cached
// under build/images) and loads them into the cluster's runtimes
// (scripts/cluster.sh images).
func (c *C) LoadImages(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{filepath.Join(c.Root, "scripts", "build-images.sh")},
		{filepath.Join(c.Root, "scripts", "cluster.sh"), "images"},
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = c.Root
		cmd.Env = append(os.Environ(), "CARAVAN_CLUSTER_DIR="+c.Dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("harness: %s: %v: %s", strings.Join(args, " "), err, out.String())
		}
	}
}

package trainer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

func TestElasticCLI_BadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"worker"}, "coordinator or peers-file is required"},
		{[]string{"worker", "-coordinator", "a:1", "-peers-file", "f"}, "give one"},
		{[]string{"worker", "-coordinator", "a:1", "-compute-per-sample", "-1ms"}, "compute-per-sample"},
		{[]string{"ps", "-index", "1"}, "coordinator or peers-file is required"},
		{[]string{"ps", "-micro-shards", "0"}, "micro-shards"},
		{[]string{"ps", "-micro-shards", "65"}, "micro-shards"},
		{[]string{"ps", "-checkpoint-signal", "SIGFOO"}, "checkpoint-signal"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.args, func(string) string { return "" }, &out, &errOut)
			must.Eq(t, 2, code)
			must.StrContains(t, errOut.String(), tc.want)
		})
	}
}

func TestFileLocator_PicksTheCoordinatorAndFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ps")
	must.NoError(t, os.WriteFile(path, []byte("\n127.0.0.1:2001 index-1\n"), 0o644))
	loc := FileLocator{Path: path, Tag: "index-0", Poll: 5 * time.Millisecond}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := loc.Coordinator(ctx)
	must.ErrorContains(t, err, "no coordinator")

	must.NoError(t, os.WriteFile(path, []byte("127.0.0.1:2001 index-1\n127.0.0.1:2000 a,index-0\n"), 0o644))
	addr, err := loc.Coordinator(context.Background())
	must.NoError(t, err)
	must.Eq(t, "127.0.0.1:2000", addr)
}

func TestAnswerWithSkips_WritesIncreasingSkipMarkers(t *testing.T) {
	dir := t.TempDir()
	reqs := make(chan Request)
	stopped := make(chan Request, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go AnswerWithSkips(ctx, dir, 7, reqs, &bytes.Buffer{}, func(r Request) { stopped <- r })

	reqs <- RequestCheckpoint
	reqs <- RequestCheckpointAndExit
	must.Eq(t, RequestCheckpointAndExit, <-stopped)
	m, err := protocol.ReadMarker(dir)
	must.NoError(t, err)
	must.True(t, m.Skip)
	must.Eq(t, uint64(9), m.Sequence)
}

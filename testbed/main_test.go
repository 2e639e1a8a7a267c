package testbed

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

func TestFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--dry-run", "--policies", "static,nope"}, `--policies: unknown policy "nope"`},
		{[]string{"--dry-run", "--policies", ""}, "--policies: name at least one"},
		{[]string{"--policies", "static"}, "--caravan-bin: required"},
		{[]string{"--dry-run", "--jobs", "0"}, "--jobs: must be at least 1"},
		{[]string{"--dry-run", "--clients", "0"}, "--clients"},
		{[]string{"--dry-run", "--prefix", ""}, "--prefix"},
		{[]string{"--dry-run", "extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errOut)
			must.ErrorIs(t, err, errUsage)
			must.StrContains(t, errOut.String(), tc.want)
		})
	}
}

func TestFrom(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	res := testResults()
	res.Interval, res.Cooldown = 10e9, 30e9
	must.NoError(t, Write(in, res))
	var stdout, stderr bytes.Buffer
	must.NoError(t, run(context.Background(), []string{"--from", in, "--out", out}, &stdout, &stderr))
	must.StrContains(t, stdout.String(), "optimus")
	for _, f := range []string{"summary.csv", "jobs.csv", "timeline.csv", "workload.csv", "results.json"} {
		_, err := os.Stat(filepath.Join(out, f))
		must.NoError(t, err)
	}
}

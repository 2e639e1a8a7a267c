package service

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/config"
)

// TestReload_BadQueuesKeepTheRunningConfig: a SIGHUP reload of a config
// whose queues are bad (each of the cases) fails naming the queue
// and field and applies nothing, so the running planner keeps its last
// good config; a good one is applied.
func TestReload_BadQueuesKeepTheRunningConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "planner.hcl")
	write := func(body string) { must.NoError(t, os.WriteFile(p, []byte(body), 0o600)) }
	write("queue \"a\" {\n  namespaces = [\"x\"]\n  guarantee = 1\n}\n")
	flags, err := config.ParseFlags([]string{"-config", p}, io.Discard)
	must.NoError(t, err)
	var applied []*config.Config
	apply := func(c *config.Config) { applied = append(applied, c) }
	must.NoError(t, reload(flags, apply, hclog.NewNullLogger()))
	must.SliceLen(t, 1, applied)

	cases := []struct{ name, body, err string }{
		{"overlapping namespaces", "queue \"a\" {\n  namespaces = [\"x\"]\n}\nqueue \"b\" {\n  namespaces = [\"x\"]\n}\n",
			`queue "b": namespaces: namespace "x" is already in queue "a"`},
		{"negative quota", "queue \"a\" {\n  namespaces = [\"x\"]\n  guarantee = -1\n}\n", `queue "a": guarantee`},
		{"non-numeric quota", "queue \"a\" {\n  namespaces = [\"x\"]\n  guarantee = \"lots\"\n}\n", `queue "a": guarantee: "lots" is not a number`},
		{"borrowing limit below zero", "queue \"a\" {\n  namespaces = [\"x\"]\n  borrowing_limit = -1\n}\n", `queue "a": borrowing_limit`},
		{"no namespaces", "queue \"a\" {\n  guarantee = 1\n}\n", `queue "a": namespaces: must list at least one`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			write(tc.body)
			err := reload(flags, apply, hclog.NewNullLogger())
			must.ErrorContains(t, err, tc.err)
			must.SliceLen(t, 1, applied) // nothing new applied: the running config stays
		})
	}
}

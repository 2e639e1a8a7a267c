package config

import (
	"io"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/queue"
)

func TestLoad_Queues(t *testing.T) {
	p := writeFile(t, `
queues {
  default = "batch"
  reclaim = false
}
queue "team-a" {
  namespaces      = ["team-a", "team-a-dev"]
  guarantee       = 2
  borrowing_limit = "1.5"
  lending_limit   = 1
  weight          = 2
  rightsize       = "apply"
}
queue "batch" {
  namespaces       = ["batch"]
  guarantee        = "0.25"
  allow_namespaces = ["*"]
  rightsize        = "recommend"
}
`)
	f, err := ParseFlags([]string{"-config", p}, io.Discard)
	must.NoError(t, err)
	c, err := Load(f)
	must.NoError(t, err)
	must.Eq(t, queue.Config{Default: "batch", NoReclaim: true, Queues: []queue.Queue{
		{Name: "team-a", Namespaces: []string{"team-a", "team-a-dev"}, Guarantee: 2000, BorrowLimit: 1500, LendLimit: 1000, Weight: 2},
		{Name: "batch", Namespaces: []string{"batch"}, Guarantee: 250, BorrowLimit: queue.Unlimited, LendLimit: queue.Unlimited,
			Weight: 1, Allow: []string{"*"}},
	}}, c.Queues)
	must.Eq(t, map[string]string{"team-a": "apply", "batch": "recommend"}, c.QueueRightsize)
}

func TestLoad_NoQueues(t *testing.T) {
	f, err := ParseFlags([]string{"-config", writeFile(t, `port = 9000`)}, io.Discard)
	must.NoError(t, err)
	c, err := Load(f)
	must.NoError(t, err)
	must.False(t, c.Queues.Enabled())
}

// TestLoad_BadQueues: every bad queue setting is an error naming the queue
// and the field, all reported at once; Load returns no config, so a
// running planner (SIGHUP: main keeps the running config when Load fails)
// keeps its last good one.
func TestLoad_BadQueues(t *testing.T) {
	cases := []struct {
		name, src string
		errs      []string
	}{
		{name: "overlapping namespaces", src: `
queue "a" {
  namespaces = ["x"]
}
queue "b" {
  namespaces = ["x"]
}`, errs: []string{`queue "b": namespaces: namespace "x" is already in queue "a"`}},
		{name: "negative and non-numeric quotas", src: `
queue "a" {
  namespaces = ["x"]
  guarantee  = -1
}
queue "b" {
  namespaces = ["y"]
  guarantee  = "lots"
}`, errs: []string{`queue "a": guarantee: must be a non-negative number of GPUs, got "-1"`, `queue "b": guarantee: "lots" is not a number of GPUs`}},
		{name: "negative borrowing limit", src: `
queue "a" {
  namespaces      = ["x"]
  borrowing_limit = -2
}`, errs: []string{`queue "a": borrowing_limit: must be a non-negative number of GPUs`}},
		{name: "no namespaces and a bad weight", src: `
queue "a" {
  guarantee = 1
  weight    = -1
}`, errs: []string{`queue "a": namespaces: must list at least one`, `queue "a": weight: must be in (0,`}},
		{name: "default queue unknown", src: `
queues {
  default = "ghost"
}
queue "a" {
  namespaces = ["x"]
}`, errs: []string{`queues.default: no queue named "ghost"`}},
		{name: "a typo, bad numbers and overlapping namespaces, at once", src: `
policy {
  cooldown = "soon"
}
queue "a" {
  namespaces = ["x"]
  garantee   = 2
}
queue "b" {
  namespaces = ["x"]
  guarantee  = "lots"
}`, errs: []string{`An argument named "garantee" is not expected here`, `policy.cooldown: invalid duration "soon"`,
			`queue "b": guarantee: "lots" is not a number of GPUs`, `queue "b": namespaces: namespace "x" is already in queue "a"`}},
		{name: "a bad guarantee is not compared with the lending limit", src: `
queue "a" {
  namespaces    = ["x"]
  guarantee     = "lots"
  lending_limit = 1
}`, errs: []string{`queue "a": guarantee: "lots" is not a number of GPUs`}},
		{name: "bad rightsize with a bad guarantee, at once", src: `
queue "a" {
  namespaces = ["x"]
  rightsize  = "always"
  guarantee  = "lots"
}`, errs: []string{`queue "a": rightsize: want "recommend" or "apply", got "always"`, `queue "a": guarantee: "lots" is not a number of GPUs`}},
		{name: "unknown field", src: `
queue "a" {
  namespaces = ["x"]
  quota      = 2
}`, errs: []string{`quota`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFlags([]string{"-config", writeFile(t, tc.src)}, io.Discard)
			must.NoError(t, err)
			c, err := Load(f)
			must.Nil(t, c)
			must.Error(t, err)
			for _, e := range tc.errs {
				must.StrContains(t, err.Error(), e)
			}
			must.Eq(t, len(tc.errs), strings.Count(err.Error(), "\n")+1, must.Sprint(err.Error()))
		})
	}
}

package queue

import (
	"errors"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

const g = 1000 // one GPU in milli units

func TestParseGPUs(t *testing.T) {
	cases := []struct {
		in   string
		want int
		err  string
	}{
		{in: "2", want: 2 * g},
		{in: "0.25", want: 250},
		{in: " 1.5 ", want: 1500},
		{in: "0", want: 0},
		{in: "-1", err: "non-negative"},
		{in: "two", err: "not a number"},
		{in: "NaN", err: "non-negative"},
		{in: "Inf", err: "non-negative"},
		{in: "0.0001", err: "three decimals"},
		{in: "1e12", err: "at most"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseGPUs("queue.a.guarantee", tc.in)
			if tc.err != "" {
				must.ErrorContains(t, err, tc.err)
				must.ErrorContains(t, err, "queue.a.guarantee")
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
		})
	}
}

func q(name string, guarantee int, ns ...string) Queue {
	return Queue{Name: name, Namespaces: ns, Guarantee: guarantee, BorrowLimit: Unlimited, LendLimit: Unlimited, Weight: 1}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		errs []string // every one must appear
	}{
		{name: "ok", cfg: Config{Queues: []Queue{q("a", 2*g, "ns-a"), q("b", 2*g, "ns-b")}}},
		{name: "overlapping namespaces", cfg: Config{Queues: []Queue{q("a", g, "x", "y"), q("b", g, "y")}},
			errs: []string{`queue "b": namespaces: namespace "y" is already in queue "a"`}},
		{name: "negative quota", cfg: Config{Queues: []Queue{q("a", -g, "x")}},
			errs: []string{`queue "a": guarantee: must not be negative`}},
		{name: "negative borrowing limit",
			cfg:  Config{Queues: []Queue{{Name: "a", Namespaces: []string{"x"}, BorrowLimit: -5, LendLimit: Unlimited, Weight: 1}}},
			errs: []string{`queue "a": borrowing_limit: must not be negative`}},
		{name: "lending above guarantee",
			cfg:  Config{Queues: []Queue{{Name: "a", Namespaces: []string{"x"}, Guarantee: g, BorrowLimit: Unlimited, LendLimit: 2 * g, Weight: 1}}},
			errs: []string{`queue "a": lending_limit: must not exceed the guarantee 1`}},
		{name: "no namespaces", cfg: Config{Queues: []Queue{q("a", g)}},
			errs: []string{`queue "a": namespaces: must list at least one`}},
		// No cluster size makes a config wrong: a round scales guarantees
		// above the live cluster (EffectiveGuarantees).
		{name: "guarantees above any cluster", cfg: Config{Queues: []Queue{q("a", 2*g, "x"), q("b", 3*g, "y"), q("c", maxGPUs*g, "z")}}},
		{name: "bad weight", cfg: Config{Queues: []Queue{{Name: "a", Namespaces: []string{"x"}, BorrowLimit: Unlimited, LendLimit: Unlimited}}},
			errs: []string{`queue "a": weight: must be in (0,`}},
		{name: "duplicate name and empty name", cfg: Config{Queues: []Queue{q("a", 0, "x"), q("a", 0, "y"), q("", 0, "z")}},
			errs: []string{`queue "a": name: defined twice`, `queue "#2": name: must not be empty`}},
		{name: "unknown default", cfg: Config{Queues: []Queue{q("a", 0, "x")}, Default: "nope"},
			errs: []string{`queues.default: no queue named "nope"`}},
		{name: "all at once", cfg: Config{Queues: []Queue{q("a", -g), q("b", g, "y", "y")}},
			errs: []string{`queue "a": namespaces`, `queue "a": guarantee`, `queue "b": namespaces: namespace "y" listed twice`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.errs) == 0 {
				must.NoError(t, err)
				return
			}
			must.True(t, errors.Is(err, ErrInvalid))
			for _, e := range tc.errs {
				must.StrContains(t, err.Error(), e)
			}
			must.Eq(t, len(tc.errs), len(strings.Split(err.Error(), "\n")), must.Sprint(err))
		})
	}
}

func TestAssign(t *testing.T) {
	a := q("a", g, "team-a")
	b := q("b", g, "team-b")
	shared := q("batch", 0, "batch")
	shared.Allow = []string{"team-a"}
	open := q("open", 0, "open")
	open.Allow = []string{"*"}
	cfg := Config{Queues: []Queue{a, b, shared, open}}
	cases := []struct {
		name, ns, meta, want, why string
	}{
		{name: "namespace member", ns: "team-a", want: "a"},
		{name: "meta names own queue", ns: "team-a", meta: "a", want: "a"},
		{name: "meta chooses an allowed queue", ns: "team-a", meta: "batch", want: "batch"},
		{name: "meta chooses a queue open to all", ns: "team-b", meta: "open", want: "open"},
		{name: "meta names another team's queue", ns: "team-b", meta: "a", want: "b", why: `namespace "team-b" may not use that queue; in its namespace's queue "b"`},
		{name: "meta names a queue not allowed", ns: "team-b", meta: "batch", want: "b", why: "may not use"},
		{name: "meta names no queue", ns: "team-a", meta: "ghost", want: "a", why: `caravan_queue="ghost" names no queue`},
		{name: "unknown namespace", ns: "other", want: DefaultName},
		{name: "unknown namespace, refused meta", ns: "other", meta: "a", want: DefaultName, why: "may not use"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, why := cfg.Assign(tc.ns, tc.meta)
			must.Eq(t, tc.want, got)
			if tc.why == "" {
				must.Eq(t, "", why)
			} else {
				must.StrContains(t, why, tc.why)
			}
		})
	}
	t.Run("configured default", func(t *testing.T) {
		c := Config{Queues: []Queue{a, b}, Default: "b"}
		got, _ := c.Assign("other", "")
		must.Eq(t, "b", got)
	})
}

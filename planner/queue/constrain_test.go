package queue

import (
	"testing"
	"time"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/shoenig/test/must"
)

func TestConstrain(t *testing.T) {
	gpu := policy.Demand{GPUMilli: policy.MilliGPU}
	in := policy.Input{Now: t0, Jobs: []policy.Job{
		{ID: "elastic", Min: 1, Max: 8, Worker: gpu},
		{ID: "queued", Min: 4, Max: 4, Gang: true, Worker: gpu},
		{ID: "ps", Min: 1, Max: 4, MinPS: 1, MaxPS: 1, Worker: gpu, PSDem: policy.Demand{GPUMilli: 500}},
		{ID: "cpu", Min: 2, Max: 2},
	}}
	r := Round{Jobs: []Decision{
		{ID: "elastic", Admit: true, Cap: 3 * g},
		{ID: "queued"},
		{ID: "ps", Admit: true, Cap: 2500},
		{ID: "cpu", Admit: true},
	}}
	out, kept := Constrain(in, r)
	must.Eq(t, []int{0, 2, 3}, kept)
	must.Eq(t, 3, len(out.Jobs))
	must.Eq(t, 3, out.Jobs[0].Max)
	must.Eq(t, 2, out.Jobs[1].Max) // 2.5 GPUs less the 0.5 of its parameter server
	must.Eq(t, 2, out.Jobs[2].Max)
	must.Eq(t, 8, in.Jobs[0].Max) // the input is not changed
}

func TestDemand(t *testing.T) {
	j := policy.Job{Min: 2, Max: 4, MinPS: 1, MaxPS: 2, Worker: policy.Demand{GPUMilli: 1000}, PSDem: policy.Demand{GPUMilli: 250},
		Current: policy.Allocation{Workers: 3, PS: 1}}
	lo, hi, held := Demand(&j)
	must.Eq(t, 2250, lo)
	must.Eq(t, 4500, hi)
	must.Eq(t, 3250, held)
	qj := FromPolicy(&j, "ns", "meta")
	must.Eq(t, Job{Namespace: "ns", Requested: "meta", Min: 2250, Max: 4500, Held: 3250}, qj)
}

// TestView: a running job's view counts the time since it resumed (never
// below zero); a waiting job's, or one whose resumption is not known,
// counts none.
func TestView(t *testing.T) {
	gpu := policy.Demand{GPUMilli: policy.MilliGPU}
	running := policy.Job{ID: "r", Min: 2, Max: 4, Worker: gpu, Current: policy.Allocation{Workers: 3}}
	waiting := policy.Job{ID: "w", Min: 2, Max: 4, Worker: gpu}
	now := t0.Add(time.Hour)
	cases := []struct {
		name    string
		j       policy.Job
		resumed time.Time
		want    time.Duration
	}{
		{"running", running, t0.Add(20 * time.Minute), 40 * time.Minute},
		{"resumed after now", running, now.Add(time.Minute), 0},
		{"resumption unknown", running, time.Time{}, 0},
		{"waiting", waiting, t0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			qj := View(&tc.j, "ns", "team", now, tc.resumed)
			must.Eq(t, tc.want, qj.SinceResume)
			base := FromPolicy(&tc.j, "ns", "team")
			base.SinceResume = tc.want
			must.Eq(t, base, qj)
		})
	}
}

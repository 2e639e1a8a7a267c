package packing

import (
	"math"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func gpus(n int, mps bool) []GPU {
	out := make([]GPU, n)
	for i := range out {
		out[i] = GPU{ID: string(rune('A' + i)), Shares: 4, MPS: mps}
	}
	return out
}

// running is a measured job alone on gpu (solo 100/s).
func running(id string, gpu int, shares int, placed int64) Job {
	return Job{ID: id, Workers: 1, Declared: shares, Shares: shares, GPUs: []int{gpu}, Placed: placed, Solo: 100}
}

func waiting(id string, shares int) Job {
	return Job{ID: id, Workers: 1, Declared: shares, Shares: shares}
}

func with(j Job, f func(*Job)) Job { f(&j); return j }

func find(t *testing.T, p Plan, id string) Decision {
	t.Helper()
	for _, d := range p.Decisions {
		if d.Job == id {
			return d
		}
	}
	t.Fatalf("no decision for %s in %+v", id, p.Decisions)
	return Decision{}
}

func TestPlan(t *testing.T) {
	hist := func(r float64) func(*Job) { return func(j *Job) { j.Solo, j.History, j.HistoryN = 100, r, 2 } }
	packed := func(rate float64) func(*Job) { return func(j *Job) { j.Packed, j.PackedRounds = rate, 3 } }
	cases := []struct {
		name   string
		gpus   []GPU
		jobs   []Job
		job    string
		kind   Kind
		basis  Basis
		reason string
		gain   float64 // NaN: not checked
	}{
		{"free GPU first", gpus(2, false), []Job{running("a", 0, 2, 1), waiting("b", 2)},
			"b", Admit, BasisDeclared, "free GPU", math.NaN()},
		{"packed by predicted gain", gpus(1, false), []Job{with(running("a", 0, 2, 1), hist(0.95)), with(waiting("b", 2), hist(0.9))},
			"b", Admit, BasisOnline, "predicted combined gain 1.85 >= 1+0.10", 1.85},
		{"gain below the margin waits", gpus(1, false), []Job{with(running("a", 0, 2, 1), hist(0.75)), with(waiting("b", 2), hist(0.3))},
			"b", Wait, BasisDeclared, "0 shared GPU(s)", math.NaN()},
		{"right-sized job without packed history waits", gpus(1, false), []Job{running("a", 0, 2, 1), with(waiting("b", 2), func(j *Job) { j.Declared = 4 })},
			"b", Wait, BasisDeclared, "0 shared GPU(s)", math.NaN()},
		{"unmeasured job packs at declared shares", gpus(1, true), []Job{running("a", 0, 2, 1), waiting("b", 2)},
			"b", Admit, BasisDeclared, "no measured packed rate for the pair, at declared shares", math.NaN()},
		{"not next to a job never measured alone", gpus(1, false), []Job{with(running("a", 0, 2, 1), func(j *Job) { j.Solo = 0 }), waiting("b", 2)},
			"b", Wait, BasisDeclared, "0 shared GPU(s)", math.NaN()},
		{"never is never packed", gpus(1, false), []Job{with(running("a", 0, 2, 1), hist(1)), with(waiting("b", 2), func(j *Job) { j.Never = true; hist(1)(j) })},
			"b", Wait, BasisDeclared, `caravan_pack = "never"`, math.NaN()},
		{"nobody joins a never job", gpus(1, false), []Job{with(running("a", 0, 2, 1), func(j *Job) { j.Never = true; hist(1)(j) }), with(waiting("b", 2), hist(1))},
			"b", Wait, BasisDeclared, "0 shared GPU(s)", math.NaN()},
		{"does not fit", gpus(1, false), []Job{with(running("a", 0, 3, 1), hist(1)), with(waiting("b", 2), hist(1))},
			"b", Wait, BasisDeclared, "0 shared GPU(s)", math.NaN()},
		{"an unpacked pair is not packed again", gpus(1, false), []Job{with(running("a", 0, 2, 1), hist(1)), with(waiting("b", 2), func(j *Job) { hist(1)(j); j.Avoid = []string{"a"} })},
			"b", Wait, BasisDeclared, "0 shared GPU(s)", math.NaN()},
		{"measured loss unpacks the latest, suspended without a free GPU", gpus(1, false), []Job{
			with(running("a", 0, 2, 1), packed(45)), with(running("b", 0, 2, 2), packed(46))},
			"b", Suspend, BasisOnline, "measured combined gain 0.91 < 1.00", 0.91},
		{"an MPS pair gaining 1.12 overall still unpacks: each at 0.56 of solo, migrated to a free GPU", gpus(2, true), []Job{
			with(running("a", 0, 2, 1), packed(56)), with(running("b", 0, 2, 2), packed(56))},
			"b", Migrate, BasisOnline, "GPU A (MPS): b, a below 0.70 of solo rate", 1.12},
		{"one job below 0.7 of solo unpacks a winning pair", gpus(2, false), []Job{
			with(running("a", 0, 2, 1), packed(100)), with(running("b", 0, 2, 2), packed(60))},
			"b", Migrate, BasisOnline, "b below 0.70 of solo rate", 1.6},
		{"a never job is not the one moved: its earlier neighbour moves", gpus(2, false), []Job{
			with(running("a", 0, 2, 1), packed(45)), with(running("b", 0, 2, 2), func(j *Job) { packed(46)(j); j.Never = true })},
			"a", Migrate, BasisOnline, "unpack a from GPU A (time-sliced)", 0.91},
		{"a good pair stays", gpus(1, false), []Job{
			with(running("a", 0, 2, 1), packed(99)), with(running("b", 0, 2, 2), packed(98))},
			"A", Keep, BasisOnline, "measured combined gain 1.97 >= 1.00", 1.97},
		{"no solo rate: not unpacked on a guess", gpus(1, false), []Job{
			with(running("a", 0, 2, 1), func(j *Job) { j.Solo = 0; packed(10)(j) }), with(running("b", 0, 2, 2), func(j *Job) { j.Solo = 0; packed(10)(j) })},
			"A", Keep, BasisDeclared, "not unpacked on a guess", math.NaN()},
		{"a measured neighbour's loss moves the unmeasured newcomer", gpus(2, false), []Job{
			with(running("a", 0, 2, 1), packed(50)), with(running("b", 0, 2, 2), func(j *Job) { j.Solo = 0 })},
			"b", Migrate, BasisOnline, "a below 0.70", math.NaN()},
		{"a lying packed throughput is bounded", gpus(1, false), []Job{
			with(running("a", 0, 2, 1), packed(1e8)), with(running("b", 0, 2, 2), packed(20))},
			"b", Suspend, BasisOnline, "a 1.10 (1e+08 of 100/s solo)", 1.3},
		{"an implausible rate counts as unmeasured", gpus(1, false), []Job{
			with(running("a", 0, 2, 1), packed(math.Inf(1))), with(running("b", 0, 2, 2), packed(90))},
			"A", Keep, BasisDeclared, "a not measured", math.NaN()},
		{"a job unpacked before it was measured alone only takes free GPUs", gpus(1, false), []Job{with(running("a", 0, 2, 1), hist(1)), with(waiting("b", 2), func(j *Job) { j.Avoid = []string{"z"} })},
			"b", Wait, BasisDeclared, "0 shared GPU(s)", math.NaN()},
		{"negative memory is refused: no packing next to it", gpus(1, false), []Job{
			with(running("a", 0, 2, 1), func(j *Job) { hist(1)(j); j.PeakMemoryBytes = -1 }), with(waiting("b", 2), hist(1))},
			"b", Wait, BasisDeclared, "0 shared GPU(s)", math.NaN()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Decide(DefaultConfig(), Input{GPUs: tc.gpus, Jobs: tc.jobs})
			must.NoError(t, err)
			d := find(t, p, tc.job)
			must.Eq(t, tc.kind, d.Kind, must.Sprint(d.Reason))
			must.Eq(t, tc.basis, d.Basis, must.Sprint(d.Reason))
			must.StrContains(t, d.Reason, tc.reason)
			if !math.IsNaN(tc.gain) {
				must.InDelta(t, tc.gain, d.Gain, 1e-9)
			}
		})
	}
}

func TestPlan_BadInputNamesTheField(t *testing.T) {
	cases := []struct {
		name string
		in   Input
		cfg  Config
		want string
	}{
		{"gpu shares", Input{GPUs: []GPU{{ID: "g", Shares: 0}}}, DefaultConfig(), "gpus[0] (g): shares 0"},
		{"workers", Input{GPUs: gpus(1, false), Jobs: []Job{{ID: "x", Shares: 1, Declared: 1}}}, DefaultConfig(), "jobs[0] (x): workers 0"},
		{"shares", Input{GPUs: gpus(1, false), Jobs: []Job{{ID: "x", Workers: 1, Declared: 1}}}, DefaultConfig(), "jobs[0] (x): shares 0"},
		{"gpu index", Input{GPUs: gpus(1, false), Jobs: []Job{{ID: "x", Workers: 1, Shares: 1, Declared: 1, GPUs: []int{3}}}}, DefaultConfig(), "index 3 out of range"},
		{"margin", Input{}, Config{Margin: -1, MaxRatio: 1.1, MaxRate: 1}, "margin -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decide(tc.cfg, tc.in)
			must.Error(t, err)
			must.StrContains(t, err.Error(), tc.want)
		})
	}
}

// TestPlan_MultiWorkerJobIsAllOrNothing: a two-worker job with one free
// GPU and no GPU it may join waits, holding nothing.
func TestPlan_MultiWorkerJobIsAllOrNothing(t *testing.T) {
	in := Input{GPUs: gpus(2, false), Jobs: []Job{running("a", 0, 4, 1), {ID: "b", Workers: 2, Declared: 2, Shares: 2}}}
	p, err := Decide(DefaultConfig(), in)
	must.NoError(t, err)
	d := find(t, p, "b")
	must.Eq(t, Wait, d.Kind)
	must.SliceEmpty(t, d.GPUs)
	must.True(t, strings.Contains(d.Reason, "1 free GPU(s)"))
}

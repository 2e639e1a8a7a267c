package demo

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestWorkerChange(t *testing.T) {
	cases := []struct {
		msg      string
		from, to int
		ok       bool
	}{
		{"caravan planner: scale 1 -> 2, marginal gain 2 s per unit share", 1, 2, true},
		{"caravan planner: scale workers 2 -> 1, parameter servers 1 -> 2, marginal gain 0", 2, 1, true},
		{"caravan planner: suspend", 0, 0, false},
		{"someone else: scale 1 -> 2", 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.msg, func(t *testing.T) {
			from, to, ok := workerChange(c.msg)
			must.Eq(t, c.ok, ok)
			must.Eq(t, c.from, from)
			must.Eq(t, c.to, to)
		})
	}
}

func TestElasticOutcome_AddLog(t *testing.T) {
	log := "training ... compute=modelled 1ms/sample role=coordinator\n" +
		"step=50 loss=0.6 samples_per_sec=900 workers=1 ps=1\n" +
		"step=100 loss=0.5 samples_per_sec=1000 workers=1 ps=1\n" +
		"step=150 loss=0.4 samples_per_sec=1800 workers=2 ps=1\n" +
		"step=200 loss=0.3 samples_per_sec=2500 workers=2 ps=2\n" +
		"final step=200 loss=0.3 accuracy=0.9 params_sha256=abc123\n"
	var o ElasticOutcome
	speeds := map[int][]float64{}
	o.addLog(log, speeds)
	must.Eq(t, []int{1, 2}, o.Workers)
	must.Eq(t, uint64(200), o.FinalStep)
	must.Eq(t, "abc123", o.ParamsHash)
	// Only one-server reports count, so the speeds compare.
	must.Eq(t, map[int]float64{1: 1000, 2: 1800}, medians(speeds))
}

func TestMainRejectsInvalidFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-steps", "0"},
		{"-elastic-steps", "-5"},
		{"-caravan-bin", "x", "stray"},
	} {
		must.Eq(t, 2, Main(args), must.Sprint(args))
	}
}

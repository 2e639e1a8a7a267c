package policy

import (
	"testing"

	"github.com/shoenig/test/must"
)

// TestOptimus_MinimumReason: a job kept at its minimum says more workers
// would not shorten it only when that is so; when they would, but the GPUs
// went to a job that gains more per share, it says that instead.
func TestOptimus_MinimumReason(t *testing.T) {
	flat := SpeedFunc(func(s Shape) float64 { return 1 })
	cases := []struct {
		name string
		b    Job
		want string
	}{
		{"scales, but the other job gains more", gpuJob("b", 1, 1, 4, concave(1, 0.5), 100),
			"one more would shorten it"},
		{"does not scale", gpuJob("b", 1, 1, 4, flat, 100), "more would not shorten it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Now: t0, Cluster: gpuCluster(1, 4), Jobs: []Job{
				gpuJob("a", 0, 1, 4, concave(1, 0.01), 10000), c.b}}
			p, err := NewOptimus().Allocate(in)
			must.NoError(t, err)
			var got JobPlan
			for _, jp := range p.Jobs {
				if jp.ID == "b" {
					got = jp
				}
			}
			must.Eq(t, 1, got.Workers, must.Sprintf("%+v", p.Jobs))
			must.StrContains(t, got.Reason, c.want)
		})
	}
}

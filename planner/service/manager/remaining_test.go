package manager

import (
	"math"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// TestRemainingBoundedByDeclaredTotal: live, a job with caravan_total_steps
// 2000 at step 1850 showed remaining_steps 28648 (source fit): the loss
// curve predicted convergence far beyond the run's declared end.
func TestRemainingBoundedByDeclaredTotal(t *testing.T) {
	slow := &model.Convergence{B0: 1e-6, B1: 0.5, B2: 0.1} // converges after ~30000 steps
	fast := &model.Convergence{B0: 1, B1: 1, B2: 0.1}      // converged long ago
	must.Greater(t, 28000, slow.StepsToConverge(1e-3, 1000))
	cases := []struct {
		name     string
		meta     float64 // caravan_total_steps
		sample   float64 // the task's steps_total
		done     float64
		fit      *model.Convergence
		want     float64
		wantFrom model.Source
	}{
		{"declared in meta bounds the fit", 2000, 0, 1850, slow, 150, model.SourceDeclared},
		{"the task's own total wins over meta", 2000, 1900, 1850, slow, 50, model.SourceDeclared},
		{"a fit that ends sooner stands", 2000, 0, 1850, fast, 0, model.SourceFit},
		{"past the declared end nothing is left", 2000, 0, 2100, slow, 0, model.SourceDeclared},
		{"no declaration: the fit", 0, 0, 1850, slow, slow.StepsToConverge(1e-3, 1000) - 1850, model.SourceFit},
		{"no fit: the hint", 2000, 0, 500, nil, 1500, model.SourceHint},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rem, src := remaining(source.Spec{TotalSteps: tc.meta}, tc.sample, tc.done, tc.fit, nil)
			must.Eq(t, tc.wantFrom, src)
			must.True(t, math.Abs(rem-tc.want) < 1e-6, must.Sprintf("remaining %v, want %v", rem, tc.want))
		})
	}
}

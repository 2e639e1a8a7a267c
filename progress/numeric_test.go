package progress

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// TestNumericFields_EdgeValues puts every numeric field of the wire through
// the values that have broken planners before (zero, -0, negative, huge,
// tiny; NaN and the infinities through Validate, since JSON cannot carry
// them). Each value is either accepted, or refused naming its field: a value
// the planner's models cannot use (a loss of 0 or -0) is refused here, not
// accepted and then failing the convergence fit.
func TestNumericFields_EdgeValues(t *testing.T) {
	base := map[string]string{"step": "100", "loss": "0.5", "samples_per_sec": "32"}
	// accepted[field][value]: true when the value is accepted.
	type row struct {
		field string
		ok    map[string]bool
	}
	rows := []row{
		{"step", map[string]bool{"0": true, "-0": true, "-1": false, "1000000000000000": true, "1e15": false, "1000000000000001": false, "1e400": false, "9223372036854775808": false}},
		{"loss", map[string]bool{"0": false, "-0": false, "-0.0": false, "-1": false, "1e-31": false, "1e-30": true, "5e-324": false, "1e12": true, "1.1e12": false, "1e308": false, "1e400": false}},
		{"samples_per_sec", map[string]bool{"0": true, "-0": true, "-1": false, "1e9": true, "1e10": false, "1e400": false, "5e-324": true}},
		{"steps_per_sec", map[string]bool{"0": true, "-0": true, "-1": false, "1e6": true, "1e7": false, "1e400": false}},
		{"batch_size", map[string]bool{"0": true, "-0": true, "-1": false, "1073741824": true, "1073741825": false, "1e400": false, "0.5": false}},
		{"steps_total", map[string]bool{"0": true, "-0": true, "-1": false, "1000000000000000": true, "1e15": false, "1000000000000001": false, "1e400": false}},
		{"workers", map[string]bool{"0": true, "-0": true, "-1": false, "100000": true, "100001": false, "1e400": false}},
		{"ps", map[string]bool{"0": true, "-0": true, "-1": false, "100000": true, "100001": false, "1e400": false}},
		{"grad_sqr", map[string]bool{"0": true, "-0": true, "-1": false, "1e30": true, "1e31": false, "1e400": false, "5e-324": true}},
		{"grad_var", map[string]bool{"0": true, "-0": true, "-1": false, "1e30": true, "1e31": false, "1e400": false, "5e-324": true}},
	}
	for _, r := range rows {
		for v, ok := range r.ok {
			t.Run(r.field+"="+v, func(t *testing.T) {
				parts := []string{}
				for k, bv := range base {
					if k != r.field {
						parts = append(parts, fmt.Sprintf("%q: %s", k, bv))
					}
				}
				parts = append(parts, fmt.Sprintf("%q: %s", r.field, v))
				_, err := Decode(strings.NewReader("{" + strings.Join(parts, ", ") + "}"))
				if ok {
					must.NoError(t, err)
					return
				}
				mustNameField(t, err, r.field)
			})
		}
	}
}

// TestValidate_NonFiniteEveryFloatField: NaN and the infinities are refused
// in every float field, naming it (a Go client validates before sending).
func TestValidate_NonFiniteEveryFloatField(t *testing.T) {
	set := map[string]func(*Sample, float64){
		"loss":            func(s *Sample, v float64) { s.Loss = v },
		"samples_per_sec": func(s *Sample, v float64) { s.SamplesPerSec = v },
		"steps_per_sec":   func(s *Sample, v float64) { s.StepsPerSec = v },
		"grad_sqr":        func(s *Sample, v float64) { s.GradSqr = v },
		"grad_var":        func(s *Sample, v float64) { s.GradVar = v },
	}
	for field, f := range set {
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1) - 1} {
			s := Sample{Step: 1, Loss: 0.5, SamplesPerSec: 1}
			f(&s, v)
			mustNameField(t, s.Validate(), field)
		}
	}
	// -0 is zero: refused for loss, accepted elsewhere.
	mustNameField(t, Sample{Step: 1, Loss: math.Copysign(0, -1), SamplesPerSec: 1}.Validate(), "loss")
	must.NoError(t, Sample{Step: 1, Loss: 0.5, SamplesPerSec: math.Copysign(0, -1), GradSqr: math.Copysign(0, -1)}.Validate())
}

func mustNameField(t *testing.T, err error, field string) {
	t.Helper()
	must.ErrorIs(t, err, ErrBadSample)
	var fe *FieldError
	must.True(t, errors.As(err, &fe), must.Sprint(err))
	must.Eq(t, field, fe.Field)
	must.StrContains(t, err.Error(), field)
}

package progress

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestDecode(t *testing.T) {
	cases := []struct {
		name, body, field string
	}{
		{"minimal", `{"step": 100, "loss": 0.5, "samples_per_sec": 320}`, ""},
		{"every field", `{"step": 100, "loss": 0.5, "samples_per_sec": 320, "steps_per_sec": 5, "batch_size": 64,
			"steps_total": 1000, "workers": 4, "ps": 2, "grad_sqr": 0.1, "grad_var": 3, "gpu_memory_peak_bytes": 8589934592, "checkpointed": true, "done": false}`, ""},
		{"gpu memory peak negative", `{"step": 1, "loss": 1, "samples_per_sec": 1, "gpu_memory_peak_bytes": -1}`, "gpu_memory_peak_bytes"},
		{"gpu memory peak absurd", `{"step": 1, "loss": 1, "samples_per_sec": 1, "gpu_memory_peak_bytes": 17592186044417}`, "gpu_memory_peak_bytes"},
		{"gpu memory peak fractional", `{"step": 1, "loss": 1, "samples_per_sec": 1, "gpu_memory_peak_bytes": 1.5}`, "gpu_memory_peak_bytes"},
		{"unknown fields ignored", `{"step": 1, "loss": 1, "samples_per_sec": 1, "job": "other", "time": "x"}`, ""},
		{"step missing", `{"loss": 0.5, "samples_per_sec": 1}`, "step"},
		{"loss null", `{"step": 1, "loss": null, "samples_per_sec": 1}`, "loss"},
		{"samples_per_sec missing", `{"step": 1, "loss": 1}`, "samples_per_sec"},
		{"step 2^63-1", `{"step": 9223372036854775807, "loss": 1, "samples_per_sec": 1}`, "step"},
		{"step beyond int64", `{"step": 1e300, "loss": 1, "samples_per_sec": 1}`, "step"},
		{"step negative", `{"step": -1, "loss": 1, "samples_per_sec": 1}`, "step"},
		{"step as string", `{"step": "ten", "loss": 1, "samples_per_sec": 1}`, "step"},
		{"loss 1e308", `{"step": 1, "loss": 1e308, "samples_per_sec": 1}`, "loss"},
		{"loss negative", `{"step": 1, "loss": -1, "samples_per_sec": 1}`, "loss"},
		{"samples_per_sec absurd", `{"step": 1, "loss": 1, "samples_per_sec": 1e18}`, "samples_per_sec"},
		{"steps_per_sec absurd", `{"step": 1, "loss": 1, "samples_per_sec": 1, "steps_per_sec": 1e9}`, "steps_per_sec"},
		{"workers absurd", `{"step": 1, "loss": 1, "samples_per_sec": 1, "workers": 1000000000}`, "workers"},
		{"ps negative", `{"step": 1, "loss": 1, "samples_per_sec": 1, "ps": -2}`, "ps"},
		{"batch absurd", `{"step": 1, "loss": 1, "samples_per_sec": 1, "batch_size": 4294967296}`, "batch_size"},
		{"grad_var negative", `{"step": 1, "loss": 1, "samples_per_sec": 1, "grad_var": -1}`, "grad_var"},
		{"steps_total absurd", `{"step": 1, "loss": 1, "samples_per_sec": 1, "steps_total": 9223372036854775807}`, "steps_total"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Decode(strings.NewReader(tc.body))
			if tc.field == "" {
				must.NoError(t, err)
				must.Eq(t, int64(s.Step), s.Step)
				return
			}
			must.ErrorIs(t, err, ErrBadSample)
			var fe *FieldError
			must.True(t, errors.As(err, &fe), must.Sprint(err))
			must.Eq(t, tc.field, fe.Field)
			must.StrContains(t, err.Error(), tc.field)
		})
	}
}

func TestDecode_NotAnObjectOrTooLarge(t *testing.T) {
	for _, body := range []string{``, `[1]`, `{"step": 1,`, `{"step": 1, "loss": 1, "samples_per_sec": 1, "pad": "` + strings.Repeat("x", MaxBody) + `"}`} {
		_, err := Decode(strings.NewReader(body))
		must.ErrorIs(t, err, ErrBadSample)
	}
}

func TestValidate_KeepsEveryFieldAndRejectsNonFinite(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		must.ErrorIs(t, Sample{Loss: v}.Validate(), ErrBadSample)
		must.ErrorIs(t, Sample{SamplesPerSec: v}.Validate(), ErrBadSample)
		must.ErrorIs(t, Sample{GradSqr: v}.Validate(), ErrBadSample)
	}
	must.NoError(t, Sample{Step: MaxStep, Loss: MaxLoss, SamplesPerSec: MaxSamplesPerSec}.Validate())
}

func TestValidateAfter(t *testing.T) {
	prev := Sample{Step: 1000}
	cases := []struct {
		name    string
		step    int64
		elapsed time.Duration
		ok      bool
	}{
		{"normal advance", 2000, time.Second, true},
		{"back to an older checkpoint", 10, time.Second, true},
		{"same step", 1000, 0, true},
		{"within the slack at once", 1000 + StepSlack, 0, true},
		{"a long gap allows more", 1000 + StepSlack + int64(MaxStepsPerSec)*60, time.Minute, true},
		{"a jump to the bound", MaxStep, time.Second, false},
		{"beyond slack at once", 1001 + StepSlack, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Sample{Step: tc.step}.ValidateAfter(prev, tc.elapsed)
			if tc.ok {
				must.NoError(t, err)
				return
			}
			var fe *FieldError
			must.True(t, errors.As(err, &fe))
			must.Eq(t, "step", fe.Field)
		})
	}
}

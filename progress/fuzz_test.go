package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecode feeds arbitrary bodies to the planner's progress decoder: it
// must never panic, every error must wrap ErrBadSample, and every accepted
// sample must be within the bounds and survive a JSON round trip unchanged.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"step": 100, "loss": 0.5, "samples_per_sec": 320}`,
		`{"step": 100, "loss": 0.5, "samples_per_sec": 320, "steps_per_sec": 5, "batch_size": 64, "steps_total": 1000,
		  "workers": 4, "ps": 2, "grad_sqr": 0.1, "grad_var": 3, "checkpointed": true, "done": true}`,
		`{"step": 9223372036854775807, "loss": 1e308, "samples_per_sec": 1}`,
		`{"step": -1, "loss": "NaN", "samples_per_sec": null}`,
		`{"step": 1e400}`, `[]`, `null`, ``, `{"step":1,"step":2,"loss":0,"samples_per_sec":0}`,
		// Values the convergence fit cannot use, and the edges of the loss.
		`{"step": 1, "loss": -0, "samples_per_sec": -0}`, `{"step": 1, "loss": 0.0, "samples_per_sec": 1}`,
		`{"step": 1, "loss": 1e-30, "samples_per_sec": 5e-324, "grad_sqr": 1e30, "grad_var": -0}`,
		`{"step": 1, "loss": 5e-324, "samples_per_sec": 1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := Decode(bytes.NewReader(body))
		if err != nil {
			if !errors.Is(err, ErrBadSample) {
				t.Fatalf("error does not wrap ErrBadSample: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted an invalid sample: %v", err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("accepted sample does not encode: %v", err)
		}
		again, err := Decode(bytes.NewReader(b))
		if err != nil || again != s {
			t.Fatalf("round trip changed the sample: %+v -> %+v (%v)", s, again, err)
		}
	})
}

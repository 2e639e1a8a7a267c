package relay

import "testing"

// FuzzParseLine feeds arbitrary log lines to the relay's parser: it must
// never panic, a progress line it accepts must be a valid sample, and a
// checkpoint line never carries a negative step.
func FuzzParseLine(f *testing.F) {
	for _, seed := range []string{
		"step=100 loss=0.500000 samples_per_sec=800",
		"final step=2000 loss=0.120000 accuracy=0.97 params_sha256=ab",
		"checkpoint step=300 sequence=2 duration=1ms",
		"step=9223372036854775807 loss=1e308", "step=1 loss=NaN", "step=-1 loss=1", `step="5", loss=0.1,`, "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s, ok, ckpt := ParseLine(line)
		if ok {
			if err := s.Validate(); err != nil {
				t.Fatalf("accepted %q as %+v: %v", line, s, err)
			}
		}
		if ckpt && s.Step < 0 {
			t.Fatalf("checkpoint line %q with step %d", line, s.Step)
		}
	})
}

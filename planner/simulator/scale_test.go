package simulator

import (
	"testing"

	"github.com/caravan-nomad/caravan/planner/policy"
)

func benchRound(b *testing.B, name string, jobs, nodes int) {
	in := ScaleInput(jobs, nodes, 1)
	p, err := policy.New(name)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := p.Allocate(in)
	if err != nil {
		b.Fatal(err)
	}
	in = WithCurrent(in, plan)
	b.ResetTimer()
	for b.Loop() {
		p, _ := policy.New(name)
		if _, err := p.Allocate(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRound* measure one allocation + placement round at Optimus's
// scale; compare the 8000 and 4000 results for the growth ratio.
func BenchmarkRoundGoodput4000x16000(b *testing.B) { benchRound(b, "goodput", 4000, 16000) }
func BenchmarkRoundGoodput8000x16000(b *testing.B) { benchRound(b, "goodput", 8000, 16000) }
func BenchmarkRoundOptimus4000x16000(b *testing.B) { benchRound(b, "optimus", 4000, 16000) }
func BenchmarkRoundOptimus8000x16000(b *testing.B) { benchRound(b, "optimus", 8000, 16000) }

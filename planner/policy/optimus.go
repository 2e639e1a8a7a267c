package policy

import "fmt"

// Optimus is the marginal-gain allocator of Optimus (EuroSys'18) as the
// Pollux artifact runs it ("Optimus+Oracle" when the speed model and
// remaining work are exact): every job, in arrival order, first gets its
// minimum while capacity lasts; then one unit at a time goes to the job
// whose predicted remaining time drops most per unit of dominant share,
// until capacity runs out or no gain is positive.
//
// Placement: by default the shared pass (fewest nodes, largest jobs first).
// ArtifactPlacement switches to the artifact's rule, smallest jobs first and
// each worker on the node with the most free GPUs; the simulator sets it
// (through ArtifactMode) to reproduce the published numbers, which the
// shared pass misses by up to 17% at low load (fragmented multi-node jobs).
type Optimus struct {
	ArtifactPlacement bool
}

// NewOptimus returns the Optimus policy.
func NewOptimus() *Optimus { return &Optimus{} }

// Name implements Policy.
func (*Optimus) Name() string { return "optimus" }

// Info implements Policy. Optimus ranks by remaining work; with the exact
// remaining work and speeds the simulator gives it, it is Optimus+Oracle.
func (o *Optimus) Info() Info {
	return Info{Name: o.Name(), Class: ClassOracle, Traits: Traits{UsesRemaining: true},
		Summary: "Optimus+Oracle: marginal-gain greedy on exact remaining work and exact speeds"}
}

// Allocate implements Policy.
func (o *Optimus) Allocate(in Input) (Plan, error) {
	if err := Validate(in); err != nil {
		return Plan{}, err
	}
	order := fifoOrder(in.Jobs)
	sizes := make([]size, len(in.Jobs))
	free := admit(in, order, sizes)
	g := &greedyCtx{in: in, cap: clusterTotals(in.Cluster), free: free, gpn: maxGPUsPerNode(in.Cluster), sizes: sizes, lookahead: 1}
	g.remaining = g.optimusTime
	g.run(order)
	for i := range sizes {
		if sizes[i].w > 0 && sizes[i].gain == 0 {
			sizes[i].reason = g.atMinimum(i)
		}
	}
	return finishWith(o.Name(), in, sizes, order, placeOpts{mostFree: o.ArtifactPlacement}), nil
}

// UseArtifactMode implements ArtifactMode.
func (o *Optimus) UseArtifactMode() { o.ArtifactPlacement = true }

// atMinimum says why job i stays at the minimum the admission gave it: more
// workers would not shorten it, or they would but went to jobs that gain
// more per share (or none fit).
func (g *greedyCtx) atMinimum(i int) string {
	j, s := &g.in.Jobs[i], g.sizes[i]
	if s.w < j.maxWorkers() && g.remaining(j, i, s.w+1, s.ps) < g.remaining(j, i, s.w, s.ps) {
		return fmt.Sprintf("minimum %d workers; one more would shorten it, but the GPUs went to jobs that save more time per share", s.w)
	}
	return fmt.Sprintf("minimum %d workers; more would not shorten it", s.w)
}

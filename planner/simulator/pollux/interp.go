package pollux

import (
	"sort"

	"github.com/caravan-nomad/caravan/planner/workload"
)

// ndGrid interpolates step and sync time over (nodes, replicas, per-GPU
// batch) for placements the traces did not measure (more than four nodes).
// The artifact uses scipy's LinearNDInterpolator over the same points (the
// per-(nodes, replicas, batch) means of placements.csv plus
// scalability.csv); we interpolate on the grid axis by axis (batch, then
// replicas within a node count, then nodes), clamping at the edges, which
// agrees with it on the measured points and is linear between them.
type ndGrid struct {
	nodes []int                 // ascending node counts
	reps  map[int][]int         // node count -> ascending replica counts
	rows  map[[2]int][]bszPoint // (nodes, replicas) -> points by batch
}

type bszPoint struct{ bsz, step, sync float64 }

func newNDGrid(tr *workload.Trace) *ndGrid {
	type key3 struct {
		n, r int
		b    float64
	}
	sum := map[key3][3]float64{}
	add := func(n, r int, b, st, sy float64) {
		k := key3{n, r, b}
		v := sum[k]
		sum[k] = [3]float64{v[0] + st, v[1] + sy, v[2] + 1}
	}
	for _, p := range tr.Placements {
		r := 0
		for _, x := range p.Placement {
			r += x
		}
		add(len(p.Placement), r, p.LocalBsz, p.StepTime, p.SyncTime)
	}
	for _, s := range tr.Scalability {
		add(s.Nodes, s.Replicas, s.LocalBsz, s.StepTime, s.SyncTime)
	}
	g := &ndGrid{reps: map[int][]int{}, rows: map[[2]int][]bszPoint{}}
	for k, v := range sum {
		nr := [2]int{k.n, k.r}
		if _, ok := g.rows[nr]; !ok {
			g.reps[k.n] = append(g.reps[k.n], k.r)
		}
		g.rows[nr] = append(g.rows[nr], bszPoint{k.b, v[0] / v[2], v[1] / v[2]})
	}
	for n, rs := range g.reps {
		sort.Ints(rs)
		g.reps[n] = rs
		g.nodes = append(g.nodes, n)
	}
	sort.Ints(g.nodes)
	for k := range g.rows {
		pts := g.rows[k]
		sort.Slice(pts, func(i, j int) bool { return pts[i].bsz < pts[j].bsz })
	}
	return g
}

func bracketInts(xs []int, x int) (int, int) {
	i := sort.SearchInts(xs, x)
	switch {
	case i < len(xs) && xs[i] == x:
		return xs[i], xs[i]
	case i == 0:
		return xs[0], xs[0]
	case i == len(xs):
		return xs[len(xs)-1], xs[len(xs)-1]
	}
	return xs[i-1], xs[i]
}

func lerp(x0, x1 int, y0, y1 [2]float64, x int) [2]float64 {
	if x0 == x1 {
		return y0
	}
	f := float64(x-x0) / float64(x1-x0)
	return [2]float64{y0[0] + f*(y1[0]-y0[0]), y0[1] + f*(y1[1]-y0[1])}
}

func (g *ndGrid) atBsz(n, r int, b float64) [2]float64 {
	pts := g.rows[[2]int{n, r}]
	if b <= pts[0].bsz {
		return [2]float64{pts[0].step, pts[0].sync}
	}
	for i := 1; i < len(pts); i++ {
		if b <= pts[i].bsz {
			lo, hi := pts[i-1], pts[i]
			f := (b - lo.bsz) / (hi.bsz - lo.bsz)
			return [2]float64{lo.step + f*(hi.step-lo.step), lo.sync + f*(hi.sync-lo.sync)}
		}
	}
	l := pts[len(pts)-1]
	return [2]float64{l.step, l.sync}
}

func (g *ndGrid) atNodes(n, r int, b float64) [2]float64 {
	r0, r1 := bracketInts(g.reps[n], r)
	return lerp(r0, r1, g.atBsz(n, r0, b), g.atBsz(n, r1, b), r)
}

func (g *ndGrid) at(n, r int, b float64) (float64, float64) {
	n0, n1 := bracketInts(g.nodes, n)
	v := lerp(n0, n1, g.atNodes(n0, r, b), g.atNodes(n1, r, b), n)
	return v[0], v[1]
}

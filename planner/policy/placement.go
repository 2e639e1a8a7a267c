package policy

import (
	"fmt"
	"slices"
	"sort"
)

// Placement follows Optimus's principle (the fewest nodes, equal tasks per
// node) refined by Philly's lessons: a job's GPUs stay on as few nodes as
// possible, small jobs are best-fit packed so whole nodes stay free for big
// ones, fractional workers share a physical GPU with other fractional
// workers before a new GPU is opened, and two multi-node jobs are kept off
// the same node when there is a choice (they interfere on the network).
// Jobs whose size did not change keep their current placement.

type nodeState struct {
	id          string
	gpuFree     []int // free milli-GPUs per physical GPU
	whole       int   // GPUs with all MilliGPU free
	cpu, mem    int
	distributed int // multi-node jobs placed here
	bucket, pos int // index in placer.buckets
	ppos        int // index in placer.partial, -1 if not there
}

type placer struct {
	nodes   []nodeState
	byID    map[string]int
	buckets [][]int // buckets[k]: nodes with k whole free GPUs
	partial []int   // nodes with a partly used GPU (fractional packing)
	maxGPUs int
}

func newPlacer(c Cluster) *placer {
	p := &placer{byID: make(map[string]int, len(c.Nodes)), maxGPUs: maxGPUsPerNode(c)}
	p.buckets = make([][]int, p.maxGPUs+1)
	p.nodes = make([]nodeState, len(c.Nodes))
	for i, n := range c.Nodes {
		ns := &p.nodes[i]
		ns.id = n.ID
		ns.gpuFree = make([]int, n.GPUs)
		for g := range ns.gpuFree {
			ns.gpuFree[g] = MilliGPU
		}
		ns.whole = n.GPUs
		ns.cpu, ns.mem = n.CPUMHz, n.MemoryMB
		ns.bucket = n.GPUs
		ns.ppos = -1
		ns.pos = len(p.buckets[n.GPUs])
		p.buckets[n.GPUs] = append(p.buckets[n.GPUs], i)
		p.byID[n.ID] = i
	}
	return p
}

func (p *placer) rebucket(i int) {
	ns := &p.nodes[i]
	part := false
	for _, f := range ns.gpuFree {
		if f > 0 && f < MilliGPU {
			part = true
			break
		}
	}
	switch {
	case part && ns.ppos < 0:
		ns.ppos = len(p.partial)
		p.partial = append(p.partial, i)
	case !part && ns.ppos >= 0:
		last := p.partial[len(p.partial)-1]
		p.partial[ns.ppos] = last
		p.nodes[last].ppos = ns.ppos
		p.partial = p.partial[:len(p.partial)-1]
		ns.ppos = -1
	}
	if ns.bucket == ns.whole {
		return
	}
	b := p.buckets[ns.bucket]
	last := b[len(b)-1]
	b[ns.pos] = last
	p.nodes[last].pos = ns.pos
	p.buckets[ns.bucket] = b[:len(b)-1]
	ns.bucket = ns.whole
	ns.pos = len(p.buckets[ns.whole])
	p.buckets[ns.whole] = append(p.buckets[ns.whole], i)
}

// slots is how many units of d node i can still take.
func (p *placer) slots(i int, d Demand) int {
	ns := &p.nodes[i]
	n := 1 << 30
	if d.CPUMHz > 0 {
		n = min(n, ns.cpu/d.CPUMHz)
	}
	if d.MemoryMB > 0 {
		n = min(n, ns.mem/d.MemoryMB)
	}
	switch {
	case d.GPUMilli >= MilliGPU:
		n = min(n, ns.whole/(d.GPUMilli/MilliGPU))
	case d.GPUMilli > 0:
		s := 0
		for _, f := range ns.gpuFree {
			s += f / d.GPUMilli
		}
		n = min(n, s)
	}
	return n
}

// take places k units of d on node i and returns the physical GPU indices
// used: one per unit for shares and single GPUs, per-unit GPUs for multi-GPU
// units.
func (p *placer) take(i int, d Demand, k int) []int {
	ns := &p.nodes[i]
	ns.cpu -= d.CPUMHz * k
	ns.mem -= d.MemoryMB * k
	var gpus []int
	switch {
	case d.GPUMilli >= MilliGPU:
		per := d.GPUMilli / MilliGPU
		for u := 0; u < k; u++ {
			got := 0
			for g := range ns.gpuFree {
				if got == per {
					break
				}
				if ns.gpuFree[g] == MilliGPU {
					ns.gpuFree[g] = 0
					gpus = append(gpus, g)
					got++
				}
			}
		}
		ns.whole -= per * k
	case d.GPUMilli > 0:
		for u := 0; u < k; u++ {
			// Best fit: the fullest GPU that still holds the unit.
			best := -1
			for g, f := range ns.gpuFree {
				if f >= d.GPUMilli && (best < 0 || f < ns.gpuFree[best]) {
					best = g
				}
			}
			if ns.gpuFree[best] == MilliGPU {
				ns.whole--
			}
			ns.gpuFree[best] -= d.GPUMilli
			gpus = append(gpus, best)
		}
	}
	p.rebucket(i)
	return gpus
}

// reserve re-takes exactly a job's current placement, keeping the
// physical GPUs it lists when they are still free (otherwise picking GPUs on
// the same node). It returns the placement with the GPUs actually taken, or
// false (and nothing taken) if it no longer fits.
func (p *placer) reserve(j *Job, a Allocation) ([]NodeAlloc, bool) {
	type snap struct {
		i  int
		ns nodeState
	}
	var saved []snap
	seen := func(i int) bool {
		for _, sn := range saved {
			if sn.i == i {
				return true
			}
		}
		return false
	}
	rollback := func() {
		for k := len(saved) - 1; k >= 0; k-- {
			cur := p.nodes[saved[k].i]
			ns := saved[k].ns
			ns.bucket, ns.pos, ns.ppos = cur.bucket, cur.pos, cur.ppos
			p.nodes[saved[k].i] = ns
			p.rebucket(saved[k].i)
		}
	}
	w, ps := 0, 0
	for _, na := range a.Placement {
		w += na.Workers
		ps += na.PS
	}
	// A placement that lists workers only (PS locations unknown) keeps the
	// workers; the parameter servers are placed again below.
	psUnknown := ps == 0 && a.PS > 0
	if w != a.Workers || (ps != a.PS && !psUnknown) {
		return nil, false
	}
	out := make([]NodeAlloc, 0, len(a.Placement))
	for _, na := range a.Placement {
		if na.Workers+na.PS == 0 {
			continue
		}
		i, ok := p.byID[na.Node]
		if !ok || seen(i) {
			rollback()
			return nil, false
		}
		ns := p.nodes[i]
		ns.gpuFree = slices.Clone(ns.gpuFree)
		saved = append(saved, snap{i, ns})
		gpus, ok := p.takeExact(i, j.Worker, na.Workers, na.GPUs)
		if !ok || p.slots(i, j.PSDem) < na.PS {
			rollback()
			return nil, false
		}
		p.take(i, j.PSDem, na.PS)
		out = append(out, NodeAlloc{Node: na.Node, Workers: na.Workers, PS: na.PS, GPUs: gpus})
	}
	if psUnknown {
		m := make(map[int]*NodeAlloc, len(out))
		for k := range out {
			m[p.byID[out[k].Node]] = &out[k]
		}
		if p.placePS(j, a.PS, m) < a.PS {
			rollback()
			return nil, false
		}
		out = toPlacement(m)
	}
	if len(out) > 1 {
		for _, na := range out {
			p.nodes[p.byID[na.Node]].distributed++
		}
	}
	return out, true
}

// takeExact takes k units of d on node i on the listed GPUs when the list
// is complete and they have room, else on any GPUs of the node.
func (p *placer) takeExact(i int, d Demand, k int, want []int) ([]int, bool) {
	if p.slots(i, d) < k {
		return nil, false
	}
	ns := &p.nodes[i]
	if d.GPUMilli <= 0 || k == 0 {
		return p.take(i, d, k), true
	}
	per := max(d.GPUMilli/MilliGPU, 1)
	milli := min(d.GPUMilli, MilliGPU)
	if len(want) == k*per {
		need := map[int]int{}
		valid := true
		for _, g := range want {
			if g < 0 || g >= len(ns.gpuFree) {
				valid = false
				break
			}
			need[g] += milli
		}
		for g, m := range need {
			if !valid || ns.gpuFree[g] < m {
				valid = false
				break
			}
		}
		if valid {
			ns.cpu -= d.CPUMHz * k
			ns.mem -= d.MemoryMB * k
			for _, g := range want {
				if ns.gpuFree[g] == MilliGPU {
					ns.whole--
				}
				ns.gpuFree[g] -= milli
			}
			p.rebucket(i)
			return slices.Clone(want), true
		}
	}
	return p.take(i, d, k), true
}

// placeWorkers finds nodes for w workers of job j. It returns the per-node
// placement (possibly fewer than w workers if the cluster is fragmented).
func (p *placer) placeWorkers(j *Job, w int) map[int]*NodeAlloc {
	out := map[int]*NodeAlloc{}
	if w <= 0 {
		return out
	}
	d := j.Worker
	add := func(i, k int) {
		gpus := p.take(i, d, k)
		na := out[i]
		if na == nil {
			na = &NodeAlloc{Node: p.nodes[i].id}
			out[i] = na
		}
		na.Workers += k
		if d.GPUMilli > 0 {
			na.GPUs = append(na.GPUs, gpus...)
		}
	}
	if d.GPUMilli >= MilliGPU {
		p.placeWhole(d, w, add)
	} else {
		p.placeScan(d, w, add)
	}
	if len(out) > 1 {
		for i := range out {
			p.nodes[i].distributed++
		}
	}
	return out
}

// placeWhole places whole-GPU workers using the free-GPU buckets: O(maxGPUs)
// per node touched, so a round over thousands of nodes stays cheap.
func (p *placer) placeWhole(d Demand, w int, add func(i, k int)) {
	per := d.GPUMilli / MilliGPU
	need := w
	// Single node, best fit: the node with the fewest whole free GPUs that
	// still holds everything.
	if need*per <= p.maxGPUs {
		if i := p.findInBuckets(need*per, need, d, false); i >= 0 {
			add(i, need)
			return
		}
	}
	// Multi-node: as few nodes as possible, equal tasks per node when the
	// cluster allows it, nodes without another multi-node job first.
	perNode := p.maxGPUs / per
	if perNode < 1 {
		return
	}
	m := (need + perNode - 1) / perNode
	eq := (need + m - 1) / m
	var picked []int
	seen := map[int]bool{}
	for len(picked) < m {
		i := p.findInBuckets(eq*per, eq, d, true, seen)
		if i < 0 {
			break
		}
		seen[i] = true
		picked = append(picked, i)
	}
	if len(picked) == m {
		for _, i := range picked {
			k := min(eq, need)
			add(i, k)
			need -= k
		}
		return
	}
	// Fragmented: most free first (Optimus artifact), then best fit for the rest.
	for need > 0 {
		var i int
		if need*per <= p.maxGPUs {
			i = p.findInBuckets(need*per, need, d, true)
		} else {
			i = -1
		}
		if i < 0 {
			i = p.mostFree(d)
		}
		if i < 0 {
			return
		}
		k := min(need, p.slots(i, d))
		if k <= 0 {
			return
		}
		add(i, k)
		need -= k
	}
}

// findInBuckets returns a node with at least gpus whole free GPUs (smallest
// such bucket first) that can also take k units of d by CPU and memory;
// avoid prefers nodes without a multi-node job. Nodes in skip are ignored.
func (p *placer) findInBuckets(gpus, k int, d Demand, avoid bool, skip ...map[int]bool) int {
	const scan = 64 // bound the search inside one bucket
	fallback := -1
	for b := max(gpus, 0); b <= p.maxGPUs; b++ {
		for n, i := range p.buckets[b] {
			if n >= scan && fallback >= 0 {
				break
			}
			if len(skip) > 0 && skip[0][i] {
				continue
			}
			if p.slots(i, d) < k {
				continue
			}
			if !avoid || p.nodes[i].distributed == 0 {
				return i
			}
			if fallback < 0 {
				fallback = i
			}
		}
		if fallback >= 0 {
			return fallback
		}
	}
	return fallback
}

// mostFree returns a node with the most whole free GPUs that takes at least
// one unit of d.
func (p *placer) mostFree(d Demand) int {
	for b := p.maxGPUs; b >= 1; b-- {
		for _, i := range p.buckets[b] {
			if p.slots(i, d) > 0 {
				return i
			}
		}
	}
	return -1
}

// placeScan places fractional-GPU or CPU-only units by scanning nodes:
// one node that holds them all with the fewest spare slots (packing shares
// onto partly used GPUs), else the nodes with the most slots first.
func (p *placer) placeScan(d Demand, w int, add func(i, k int)) {
	need := w
	if d.GPUMilli > 0 {
		// Shares first go where a GPU is already partly used (best fit),
		// then to a node with a whole free GPU; only then scan everything.
		best, bestSlots := -1, 0
		for _, i := range p.partial {
			if s := p.slots(i, d); s >= need && (best < 0 || s < bestSlots || (s == bestSlots && i < best)) {
				best, bestSlots = i, s
			}
		}
		if best < 0 {
			best = p.findInBuckets(1, need, d, false)
		}
		if best >= 0 {
			add(best, need)
			return
		}
	}
	best, bestSlots := -1, 0
	type cand struct{ i, s int }
	var cands []cand
	for _, i := range p.scanNodes(d) {
		s := p.slots(i, d)
		if s <= 0 {
			continue
		}
		cands = append(cands, cand{i, s})
		if s >= need && (best < 0 || s < bestSlots) {
			best, bestSlots = i, s
		}
	}
	if best >= 0 {
		add(best, need)
		return
	}
	sort.SliceStable(cands, func(a, b int) bool {
		if cands[a].s != cands[b].s {
			return cands[a].s > cands[b].s
		}
		return cands[a].i < cands[b].i
	})
	for _, c := range cands {
		if need == 0 {
			return
		}
		k := min(need, c.s)
		add(c.i, k)
		need -= k
	}
}

// placePS puts parameter servers on the job's worker nodes first, spread
// evenly, then on any node with room.
func (p *placer) placePS(j *Job, ps int, out map[int]*NodeAlloc) int {
	if ps <= 0 {
		return 0
	}
	placed := 0
	idx := sortedNodes(out)
	for progress := true; placed < ps && progress; {
		progress = false
		for _, i := range idx {
			if placed == ps {
				break
			}
			if p.slots(i, j.PSDem) > 0 {
				p.take(i, j.PSDem, 1)
				out[i].PS++
				placed++
				progress = true
			}
		}
	}
	if placed < ps {
		p.placeScan(j.PSDem, ps-placed, func(i, k int) {
			p.take(i, j.PSDem, k)
			na := out[i]
			if na == nil {
				na = &NodeAlloc{Node: p.nodes[i].id}
				out[i] = na
			}
			na.PS += k
			placed += k
		})
	}
	return placed
}

// release gives a placement back (used when a gang cannot be completed).
func (p *placer) release(j *Job, out map[int]*NodeAlloc) {
	for _, i := range sortedNodes(out) {
		na := out[i]
		ns := &p.nodes[i]
		ns.cpu += j.Worker.CPUMHz*na.Workers + j.PSDem.CPUMHz*na.PS
		ns.mem += j.Worker.MemoryMB*na.Workers + j.PSDem.MemoryMB*na.PS
		for _, g := range na.GPUs {
			if j.Worker.GPUMilli >= MilliGPU {
				ns.gpuFree[g] = MilliGPU
			} else {
				ns.gpuFree[g] += j.Worker.GPUMilli
			}
		}
		w := 0
		for _, f := range ns.gpuFree {
			if f == MilliGPU {
				w++
			}
		}
		ns.whole = w
		if len(out) > 1 {
			ns.distributed--
		}
		p.rebucket(i)
	}
}

// toPlacement turns a node map into a sorted placement.
func toPlacement(out map[int]*NodeAlloc) []NodeAlloc {
	pl := make([]NodeAlloc, 0, len(out))
	for _, na := range out {
		if na.Workers+na.PS > 0 {
			pl = append(pl, *na)
		}
	}
	sort.Slice(pl, func(a, b int) bool { return pl[a].Node < pl[b].Node })
	return pl
}

// repack re-places a job that landed on more nodes than its size needs:
// it tries smaller sizes (down to the job's minimum, at most one node's
// worth fewer) and keeps the one whose actual node count predicts the best
// rate. s.w is updated to the chosen size.
func (p *placer) repack(j *Job, s *size, out map[int]*NodeAlloc) map[int]*NodeAlloc {
	bestW, bestRate := s.w, j.rate(s.w, s.ps, len(out))
	p.release(j, out)
	for w := s.w - 1; w >= max(j.minWorkers(), s.w-p.maxGPUs); w-- {
		o := p.placeWorkers(j, w)
		got := 0
		for _, na := range o {
			got += na.Workers
		}
		if got == w {
			if r := j.rate(w, s.ps, len(o)); r > bestRate {
				bestW, bestRate = w, r
			}
		}
		p.release(j, o)
	}
	if bestW != s.w {
		s.reason += fmt.Sprintf("; %d workers instead of %d to avoid spreading over nodes", bestW, s.w)
		s.w = bestW
	}
	return p.placeWorkers(j, s.w)
}

func sortedNodes(out map[int]*NodeAlloc) []int {
	idx := make([]int, 0, len(out))
	for i := range out {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	return idx
}

// scanNodes lists the nodes that may hold a unit of d, in node order: for
// GPU shares only nodes with a partly used or a whole free GPU (a full
// cluster then costs little to scan), for CPU-only units every node.
func (p *placer) scanNodes(d Demand) []int {
	if d.GPUMilli <= 0 {
		all := make([]int, len(p.nodes))
		for i := range all {
			all[i] = i
		}
		return all
	}
	out := append([]int(nil), p.partial...)
	for b := 1; b < len(p.buckets); b++ {
		out = append(out, p.buckets[b]...)
	}
	sort.Ints(out)
	return slices.Compact(out)
}

// placeMostFree places whole-GPU workers the way the Pollux artifact's
// Optimus does: repeatedly on the node with the most free GPUs, as many as
// it holds.
func (p *placer) placeMostFree(j *Job, w int) map[int]*NodeAlloc {
	out := map[int]*NodeAlloc{}
	d := j.Worker
	for w > 0 {
		i := p.mostFree(d)
		if i < 0 {
			break
		}
		k := min(w, p.slots(i, d))
		gpus := p.take(i, d, k)
		na := out[i]
		if na == nil {
			na = &NodeAlloc{Node: p.nodes[i].id}
			out[i] = na
		}
		na.Workers += k
		na.GPUs = append(na.GPUs, gpus...)
		w -= k
	}
	if len(out) > 1 {
		for i := range out {
			p.nodes[i].distributed++
		}
	}
	return out
}

package policy

// totals is an amount of every resource kind the planner tracks.
type totals struct {
	gpu, cpu, mem int64 // milli-GPUs, MHz, MB
}

func clusterTotals(c Cluster) totals {
	var t totals
	for _, n := range c.Nodes {
		t.gpu += int64(n.GPUs) * MilliGPU
		t.cpu += int64(n.CPUMHz)
		t.mem += int64(n.MemoryMB)
	}
	return t
}

func demandTotals(d Demand, n int) totals {
	return totals{gpu: int64(d.GPUMilli) * int64(n), cpu: int64(d.CPUMHz) * int64(n), mem: int64(d.MemoryMB) * int64(n)}
}

// fits reports whether n units of d fit into t.
func (t totals) fits(d Demand, n int) bool {
	need := demandTotals(d, n)
	return need.gpu <= t.gpu && need.cpu <= t.cpu && need.mem <= t.mem
}

func (t *totals) sub(d Demand, n int) {
	need := demandTotals(d, n)
	t.gpu -= need.gpu
	t.cpu -= need.cpu
	t.mem -= need.mem
}

func (t *totals) add(d Demand, n int) {
	need := demandTotals(d, n)
	t.gpu += need.gpu
	t.cpu += need.cpu
	t.mem += need.mem
}

// share is the dominant share of one unit of d in a cluster of capacity t:
// the largest fraction of any resource it takes (DRF's dominant share). A
// unit demanding nothing the cluster has gets a tiny share so gains stay
// finite.
func (t totals) share(d Demand) float64 {
	s := 0.0
	if t.gpu > 0 {
		s = max(s, float64(d.GPUMilli)/float64(t.gpu))
	}
	if t.cpu > 0 {
		s = max(s, float64(d.CPUMHz)/float64(t.cpu))
	}
	if t.mem > 0 {
		s = max(s, float64(d.MemoryMB)/float64(t.mem))
	}
	if s == 0 {
		s = 1e-9
	}
	return s
}

// accounts reports whether the cluster t tracks any resource d asks for.
func (t totals) accounts(d Demand) bool {
	return (t.gpu > 0 && d.GPUMilli > 0) || (t.cpu > 0 && d.CPUMHz > 0) || (t.mem > 0 && d.MemoryMB > 0)
}

// psShare is the dominant share a parameter server of j is charged. A
// server that asks for nothing the cluster accounts (the planner service
// tracks GPUs only, and servers are CPU tasks) is charged one worker's
// share: without a price, its gain per share would be the saving divided by
// share's 1e-9 floor, and every server step would beat every worker step
// (and report a gain of ~1e9 s per share).
func (t totals) psShare(j *Job) float64 {
	if t.accounts(j.PSDem) || !t.accounts(j.Worker) {
		return t.share(j.PSDem)
	}
	return t.share(j.Worker)
}

// maxGPUsPerNode is the largest node's GPU count (at least 1), used to
// predict how many nodes a job of a given size needs.
func maxGPUsPerNode(c Cluster) int {
	m := 1
	for _, n := range c.Nodes {
		m = max(m, n.GPUs)
	}
	return m
}

// nodesFor predicts the fewest nodes w workers of demand d need when packed.
func nodesFor(w int, d Demand, gpusPerNode int) int {
	if w <= 0 {
		return 0
	}
	if d.GPUMilli <= 0 {
		return 1
	}
	perNode := gpusPerNode * MilliGPU / d.GPUMilli
	if perNode < 1 {
		perNode = 1
	}
	return (w + perNode - 1) / perNode
}

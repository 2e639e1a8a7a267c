package policy

import (
	"fmt"
	"math/rand/v2"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// concave returns a speed model with rate(w) = w / (a + b*w) (diminishing
// returns), so remaining time R*(a/w + b) is convex in w.
func concave(a, b float64) SpeedModel {
	return SpeedFunc(func(s Shape) float64 {
		if s.Workers <= 0 {
			return 0
		}
		w := float64(s.Workers)
		return w / (a + b*w)
	})
}

func gpuCluster(nodes, gpus int) Cluster {
	c := Cluster{}
	for i := 0; i < nodes; i++ {
		c.Nodes = append(c.Nodes, Node{ID: fmt.Sprintf("n%03d", i), GPUs: gpus, CPUMHz: 32000, MemoryMB: 256000})
	}
	return c
}

func gpuJob(id string, at int, min, max int, speed SpeedModel, remaining float64) Job {
	return Job{
		ID: id, Submitted: t0.Add(time.Duration(at) * time.Second),
		Min: min, Max: max,
		Worker: Demand{GPUMilli: MilliGPU, CPUMHz: 1000, MemoryMB: 4000},
		Speed:  speed, Remaining: remaining,
	}
}

// randomInput builds a mixed instance: whole and fractional GPU workers,
// gangs, parameter servers, CPU and memory limits, current allocations.
func randomInput(r *rand.Rand, nodes, jobs int) Input {
	in := Input{Now: t0.Add(time.Hour)}
	for i := 0; i < nodes; i++ {
		in.Cluster.Nodes = append(in.Cluster.Nodes, Node{
			ID: fmt.Sprintf("n%03d", i), GPUs: 1 + r.IntN(8),
			CPUMHz: 8000 + 1000*r.IntN(24), MemoryMB: 16000 + 4000*r.IntN(32),
		})
	}
	for i := 0; i < jobs; i++ {
		min := 1 + r.IntN(3)
		j := gpuJob(fmt.Sprintf("j%03d", i), r.IntN(3600), min, min+r.IntN(12),
			concave(0.5+r.Float64()*5, 0.01+r.Float64()*0.2), 100+r.Float64()*10000)
		j.Gang = r.IntN(2) == 0
		j.Priority = r.IntN(2)
		j.AttainedService = r.Float64() * 100000
		j.Age = time.Duration(r.IntN(7200)) * time.Second
		j.Restarts = r.IntN(5)
		switch r.IntN(4) {
		case 0:
			j.Worker.GPUMilli = []int{250, 500}[r.IntN(2)]
		case 1:
			j.MinPS, j.MaxPS = 1, 1+r.IntN(3)
			j.PSDem = Demand{CPUMHz: 2000, MemoryMB: 8000}
		}
		in.Jobs = append(in.Jobs, j)
	}
	return in
}

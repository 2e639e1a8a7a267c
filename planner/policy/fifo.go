package policy

import "fmt"

// FIFO runs jobs in arrival order (priority first), each with its maximum
// workers, all or nothing; it stops at the first job that does not fit
// (no backfilling), like a plain batch queue.
type FIFO struct{}

// NewFIFO returns the FIFO policy.
func NewFIFO() *FIFO { return &FIFO{} }

// Name implements Policy.
func (*FIFO) Name() string { return "fifo" }

// Info implements Policy.
func (f *FIFO) Info() Info {
	return Info{Name: f.Name(), Class: ClassDeclared, Traits: Traits{FixedSize: true},
		Summary: "arrival order, each job at its requested size, all or nothing, no backfilling"}
}

// Allocate implements Policy.
func (f *FIFO) Allocate(in Input) (Plan, error) {
	if err := Validate(in); err != nil {
		return Plan{}, err
	}
	order := fifoOrder(in.Jobs)
	sizes := make([]size, len(in.Jobs))
	free := clusterTotals(in.Cluster)
	blocked := false
	for pos, i := range order {
		j := &in.Jobs[i]
		w, ps := j.maxWorkers(), max(j.MaxPS, j.MinPS)
		if !blocked && free.fits(j.Worker, w) && free.fits(j.PSDem, ps) {
			free.sub(j.Worker, w)
			free.sub(j.PSDem, ps)
			sizes[i] = size{w: w, ps: ps, reason: fmt.Sprintf("fifo: position %d, runs with %d workers", pos, w)}
			continue
		}
		blocked = true
		sizes[i].reason = fmt.Sprintf("fifo: queued at position %d", pos)
	}
	return finish(f.Name(), in, sizes, order), nil
}

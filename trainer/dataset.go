package trainer

// Domain tags keep the hash streams of different uses apart.
const (
	tagFeature uint64 = iota + 1
	tagTeacher
	tagNoise
	tagInit
	tagBatch
)

// Dataset is a synthetic binary classification problem: inputs uniform in
// [-1,1)^features, labels from a fixed random "teacher" network, a fraction
// flipped. It is materialised once (small) and identical for a given seed.
type Dataset struct {
	X        [][]float64
	Y        []float64
	features int
}

// NewDataset builds the dataset of c.
func NewDataset(c Config) *Dataset {
	// Teacher: a random linear layer plus a pairwise term, so the student
	// MLP has something non-linear to learn.
	w := make([]float64, c.Features)
	for j := range w {
		w[j] = gaussian(mix(c.Seed, tagTeacher, uint64(j), 0), mix(c.Seed, tagTeacher, uint64(j), 1))
	}
	d := &Dataset{X: make([][]float64, c.Samples), Y: make([]float64, c.Samples), features: c.Features}
	for i := 0; i < c.Samples; i++ {
		x := make([]float64, c.Features)
		for j := range x {
			x[j] = symmetric(mix(c.Seed, tagFeature, uint64(i), uint64(j)))
		}
		z := 0.0
		for j := range x {
			z += w[j] * x[j]
		}
		if c.Features > 1 {
			z += 2 * x[0] * x[1]
		}
		y := 0.0
		if z > 0 {
			y = 1
		}
		if unit(mix(c.Seed, tagNoise, uint64(i))) < c.LabelNoise {
			y = 1 - y
		}
		d.X[i], d.Y[i] = x, y
	}
	return d
}

// batchIndex is the sample in slot j of step s's mini-batch: sampling with
// replacement by hash, so a batch depends only on (seed, step, slot).
func batchIndex(c Config, step uint64, j int) int {
	return int(mix(c.Seed, tagBatch, step, uint64(j)) % uint64(c.Samples))
}

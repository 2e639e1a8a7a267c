package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"
)

func TestNNLS(t *testing.T) {
	cases := []struct {
		name string
		a    [][]float64
		b    []float64
		want []float64
	}{
		{"exact positive", [][]float64{{1, 0}, {0, 1}, {1, 1}}, []float64{2, 3, 5}, []float64{2, 3}},
		{"negative clipped", [][]float64{{1, 0}, {0, 1}}, []float64{2, -3}, []float64{2, 0}},
		{"all negative", [][]float64{{1, 0}, {0, 1}}, []float64{-1, -3}, []float64{0, 0}},
		// Classic: unconstrained solution has a negative component.
		{"coupled", [][]float64{{1, 1}, {1, 2}, {1, 3}}, []float64{3, 2, 1}, []float64{2, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x, _, err := NNLS(tc.a, tc.b)
			must.NoError(t, err)
			must.Eq(t, len(tc.want), len(x))
			for i := range x {
				must.True(t, math.Abs(x[i]-tc.want[i]) < 1e-9, must.Sprintf("x[%d]=%v want %v", i, x[i], tc.want[i]))
			}
		})
	}
}

// TestNNLSOptimality checks the KKT conditions on random problems: x >= 0,
// the gradient is ~0 on the positive set and <= 0 on the zero set.
func TestNNLSOptimality(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 50; trial++ {
		m, n := 5+r.IntN(20), 1+r.IntN(6)
		a := make([][]float64, m)
		b := make([]float64, m)
		for i := range a {
			a[i] = make([]float64, n)
			for j := range a[i] {
				a[i][j] = r.NormFloat64()
			}
			b[i] = r.NormFloat64()
		}
		x, _, err := NNLS(a, b)
		must.NoError(t, err)
		for j := 0; j < n; j++ {
			g := 0.0 // (A^T (b - A x))_j
			for i := 0; i < m; i++ {
				ax := 0.0
				for k := 0; k < n; k++ {
					ax += a[i][k] * x[k]
				}
				g += a[i][j] * (b[i] - ax)
			}
			must.True(t, x[j] >= 0)
			if x[j] > 1e-9 {
				must.True(t, math.Abs(g) < 1e-6, must.Sprintf("trial %d: gradient %v on positive x[%d]", trial, g, j))
			} else {
				must.True(t, g < 1e-6, must.Sprintf("trial %d: gradient %v on zero x[%d]", trial, g, j))
			}
		}
	}
}

func TestNNLSBadInput(t *testing.T) {
	_, _, err := NNLS(nil, nil)
	must.True(t, errors.Is(err, ErrBadProblem))
	_, _, err = NNLS([][]float64{{1, 2}, {1}}, []float64{1, 2})
	must.True(t, errors.Is(err, ErrBadProblem))
	_, _, err = NNLS([][]float64{{math.NaN()}}, []float64{1})
	must.True(t, errors.Is(err, ErrBadProblem))
}

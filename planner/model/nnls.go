package model

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// ErrBadProblem is returned for malformed least-squares problems.
var ErrBadProblem = errors.New("bad least-squares problem")

// NNLS solves min ||A x - b||_2 subject to x >= 0 with the active-set
// algorithm of Lawson and Hanson (Solving Least Squares Problems, 1974,
// ch. 23). a is row-major with len(b) rows. It returns x and the residual
// norm ||A x - b||.
func NNLS(a [][]float64, b []float64) ([]float64, float64, error) {
	m := len(b)
	if m == 0 || len(a) != m {
		return nil, 0, fmt.Errorf("%w: %d rows in A, %d in b", ErrBadProblem, len(a), m)
	}
	n := len(a[0])
	if n == 0 {
		return nil, 0, fmt.Errorf("%w: no columns", ErrBadProblem)
	}
	A := mat.NewDense(m, n, nil)
	for i, row := range a {
		if len(row) != n {
			return nil, 0, fmt.Errorf("%w: row %d has %d columns, want %d", ErrBadProblem, i, len(row), n)
		}
		for j, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, 0, fmt.Errorf("%w: A[%d][%d] is %v", ErrBadProblem, i, j, v)
			}
			A.Set(i, j, v)
		}
	}
	for i, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, 0, fmt.Errorf("%w: b[%d] is %v", ErrBadProblem, i, v)
		}
	}
	bv := mat.NewVecDense(m, append([]float64(nil), b...))

	x := make([]float64, n)
	passive := make([]bool, n)
	scale := mat.Norm(A, 1) * mat.Norm(bv, 2)
	tol := 10 * math.Max(float64(m), float64(n)) * 2.2e-16 * math.Max(scale, 1)

	grad := func() []float64 { // w = A^T (b - A x)
		r := mat.NewVecDense(m, nil)
		r.MulVec(A, mat.NewVecDense(n, x))
		r.SubVec(bv, r)
		w := mat.NewVecDense(n, nil)
		w.MulVec(A.T(), r)
		return w.RawVector().Data
	}
	solvePassive := func() []float64 {
		idx := []int{}
		for j := range passive {
			if passive[j] {
				idx = append(idx, j)
			}
		}
		s := make([]float64, n)
		if len(idx) == 0 {
			return s
		}
		sub := mat.NewDense(m, len(idx), nil)
		for r := 0; r < m; r++ {
			for c, j := range idx {
				sub.Set(r, c, A.At(r, j))
			}
		}
		var svd mat.SVD
		if !svd.Factorize(sub, mat.SVDThin) {
			return s
		}
		rank := svd.Rank(1e-12)
		if rank == 0 {
			return s
		}
		var z mat.VecDense
		svd.SolveVecTo(&z, bv, rank)
		for c, j := range idx {
			s[j] = z.AtVec(c)
		}
		return s
	}

	maxIter := 3 * n
	for iter := 0; iter < maxIter; iter++ {
		w := grad()
		t, best := -1, tol
		for j := range w {
			if !passive[j] && w[j] > best {
				t, best = j, w[j]
			}
		}
		if t < 0 {
			break
		}
		passive[t] = true
		for inner := 0; inner < 3*n; inner++ {
			s := solvePassive()
			feasible := true
			for j := range s {
				if passive[j] && s[j] <= 0 {
					feasible = false
					break
				}
			}
			if feasible {
				copy(x, s)
				break
			}
			alpha := math.Inf(1)
			for j := range s {
				if passive[j] && s[j] <= 0 {
					alpha = math.Min(alpha, x[j]/(x[j]-s[j]))
				}
			}
			for j := range x {
				x[j] += alpha * (s[j] - x[j])
				if passive[j] && x[j] <= tol {
					passive[j] = false
					x[j] = 0
				}
			}
		}
	}
	for j := range x {
		if x[j] < 0 {
			x[j] = 0
		}
	}
	r := mat.NewVecDense(m, nil)
	r.MulVec(A, mat.NewVecDense(n, x))
	r.SubVec(bv, r)
	return x, mat.Norm(r, 2), nil
}

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
	A, bv, err := nnlsProblem(a, b)
	if err != nil {
		return nil, 0, err
	}
	m, n := A.Dims()

	x := make([]float64, n)
	passive := make([]bool, n)
	scale := mat.Norm(A, 1) * mat.Norm(bv, 2)
	tol := 10 * math.Max(float64(m), float64(n)) * 2.2e-16 * math.Max(scale, 1)

	maxIter := 3 * n
	for iter := 0; iter < maxIter; iter++ {
		w := nnlsGrad(A, bv, x)
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
		nnlsInner(A, bv, x, passive, tol)
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

// nnlsProblem checks the shapes and finiteness of a and b and copies them
// into gonum's types.
func nnlsProblem(a [][]float64, b []float64) (*mat.Dense, *mat.VecDense, error) {
	m := len(b)
	if m == 0 || len(a) != m {
		return nil, nil, fmt.Errorf("%w: %d rows in A, %d in b", ErrBadProblem, len(a), m)
	}
	n := len(a[0])
	if n == 0 {
		return nil, nil, fmt.Errorf("%w: no columns", ErrBadProblem)
	}
	A := mat.NewDense(m, n, nil)
	for i, row := range a {
		if len(row) != n {
			return nil, nil, fmt.Errorf("%w: row %d has %d columns, want %d", ErrBadProblem, i, len(row), n)
		}
		for j, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, nil, fmt.Errorf("%w: A[%d][%d] is %v", ErrBadProblem, i, j, v)
			}
			A.Set(i, j, v)
		}
	}
	for i, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, fmt.Errorf("%w: b[%d] is %v", ErrBadProblem, i, v)
		}
	}
	return A, mat.NewVecDense(m, append([]float64(nil), b...)), nil
}

// nnlsGrad is w = A^T (b - A x).
func nnlsGrad(A *mat.Dense, bv *mat.VecDense, x []float64) []float64 {
	m, n := A.Dims()
	r := mat.NewVecDense(m, nil)
	r.MulVec(A, mat.NewVecDense(n, x))
	r.SubVec(bv, r)
	w := mat.NewVecDense(n, nil)
	w.MulVec(A.T(), r)
	return w.RawVector().Data
}

// nnlsSolvePassive solves the unconstrained least-squares problem on the
// passive columns (a truncated SVD); the other entries are zero.
func nnlsSolvePassive(A *mat.Dense, bv *mat.VecDense, passive []bool) []float64 {
	m, n := A.Dims()
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

// nnlsInner is Lawson and Hanson's inner loop: it moves x towards the
// passive set's solution, dropping columns that would turn negative,
// until that solution is feasible.
func nnlsInner(A *mat.Dense, bv *mat.VecDense, x []float64, passive []bool, tol float64) {
	n := len(x)
	for inner := 0; inner < 3*n; inner++ {
		s := nnlsSolvePassive(A, bv, passive)
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

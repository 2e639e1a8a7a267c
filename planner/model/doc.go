// Package model holds the planner's performance models, pure Go with no
// Nomad in it:
//
//   - NNLS: Lawson-Hanson non-negative least squares (gonum has none), with
//     gonum's SVD for the unconstrained sub-problems.
//   - Convergence: Optimus's loss curve l(k) = 1/(b0*k + b1) + b2, b >= 0,
//     refitted online with recency weights, and the remaining steps to a
//     target loss or to convergence, with an honest cold start (a user hint
//     or a prior from finished jobs of the same kind).
//   - Speed: steps/s as a function of resources, fitted by NNLS: Optimus's
//     parameter-server forms (asynchronous and synchronous) and an
//     all-reduce, GPU-only form for modern data-parallel jobs.
//   - Efficiency: statistical efficiency of a batch size from gradient
//     statistics (the gradient noise scale), which turns throughput into
//     goodput.
//
// Every fit reports its quality (points used, residuals).
package model

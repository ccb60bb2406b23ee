// min_{w in simplex} w^T K w by a primal active-set method (the final weights of Recombination
// Thinning, Alg. 4): the loop of stein_coreset.algorithms.weights.simplex_weights with the
// Cholesky factor of the free set updated as points enter (one forward substitution) and leave
// (Givens rotations), O(k^2) per step instead of a refactorisation, serial and without BLAS,
// so it neither spins against other work nor runs on threads that n_threads does not size.
//
// The affine step on the free set P solves Ks_PP y = c_P with Ks = D^{-1} K D^{-1}, c = 1 / d,
// d = sqrt(diag K) (a unit diagonal, as affine_weights scales it), then z_P = y / d / sum.
#pragma once

#include <cstdint>

namespace sc {

// K: p x p row-major, symmetric; w0: p feasible start (clipped at 0, renormalised); out: p.
// Returns the number of steps taken (>= 0), or -1 when an affine step meets a free set the
// factor cannot solve reliably (a pivot below 1e-10 of the largest squared, a non-positive
// Schur complement, or a non-positive or non-finite weight sum): the caller then runs the
// eigendecomposition fallback of affine_weights, and out is undefined.
int64_t simplex_qp(const double* K, int64_t p, const double* w0, int64_t max_iter, double* out);

// The affine step alone on all p points (affine_weights, Eq. 64): argmin_{1^T w = 1} w^T K w
// into out through the same scaled Cholesky factor; false (out undefined) in the cases where
// simplex_qp returns -1, for the caller's eigendecomposition fallback.
bool affine_weights(const double* K, int64_t p, double* out);

}  // namespace sc

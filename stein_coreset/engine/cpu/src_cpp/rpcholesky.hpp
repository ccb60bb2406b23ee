#pragma once

#include "stein_kernel.hpp"

#include <cstdint>

namespace sc {

// Steps i0 .. i1-1 of weighted randomly pivoted Cholesky (paper Alg. F.1) on the reweighted
// matrix K'_ij = sw_i k_P(x_i, x_j) sw_j, resumable: the state is the residual diagonal d (n),
// the factor Ft (rank x n, row i is the i-th column of F, K' ~ F F^T) and pivots (rank).
// u[i - i0] in [0, 1) draws the i-th pivot: the first s with cumsum(d)[s] > u * sum(d), the
// sums taken in index order (so the pivots equal those of a sequential cumulative sum).
// Stops early when sum(d) <= tol or the pivot's residual is not positive; returns the number
// of the step it stopped at (i1 when it did not stop). O(n (d + i)) per step i.
int64_t weighted_rpcholesky(const KernelSpec& K, const double* sw, double* d, double* Ft,
                            int64_t rank, int64_t* pivots, int64_t i0, int64_t i1,
                            const double* u, double tol, int n_threads);

}  // namespace sc

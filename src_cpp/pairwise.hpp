// Pairwise distances of a small point set and their median: the median bandwidth (paper, Sec. 5).
//
// For m points u_0 .. u_{m-1} in R^d (row-major, U[i * d + c]) the N = m (m - 1) / 2 squared
// distances of the pairs i < j are
//
//     q_ij = (...((0 + t_0^2) + t_1^2) + ...) + t_{d-1}^2,    t_c = u_ic - u_jc,
//
// summed coordinate by coordinate in this order, with no fused multiply-add: bit for bit what
// stein_coreset.kernels.squared_distances computes with NumPy, and, like it, invariant to a shift
// of the data (no |u|^2 + |v|^2 - 2 u.v expansion). They are stored packed by rows:
// pair (i, j) at row_offset(i, m) + (j - i - 1).
//
// median_pairwise_distance returns numpy.median(sqrt(q)) exactly: the order statistics of sqrt(q)
// are the square roots of those of q (sqrt is correctly rounded and monotone), so with
// a = q_(k_lo), b = q_(k_hi), k_lo = (N - 1) / 2, k_hi = N / 2 (0-based), it is sqrt(b) for odd N
// and (sqrt(a) + sqrt(b)) / 2 for even N, the mean NumPy takes of the two middle values.
//
// Selection runs on the team: a strided sample of q brackets the two middle ranks between two
// pivots, one parallel pass counts the entries below and inside the bracket per chunk, a second
// copies the bracketed entries in chunk order, and std::nth_element finishes on those few (a few
// per cent of N). When the bracket misses (it cannot for the sample sizes used, but the data
// decide), the exact serial std::nth_element over all of q answers instead. The value does not
// depend on n_threads. Cost: O(N d) for the distances, O(N) for the selection.
#pragma once

#include <cstdint>

namespace sc {

// Offset of pair (i, i + 1) in the packed upper triangle of m points.
inline int64_t row_offset(int64_t i, int64_t m) { return i * (2 * m - i - 1) / 2; }

// q (N = m (m - 1) / 2 entries, packed by rows as above).
void pairwise_sq_distances(const double* U, int64_t m, int64_t d, double* q, int n_threads);

// numpy.median of the N pairwise distances sqrt(q_ij), i < j; m >= 2. `bracket = false` skips
// the bracketing and selects with std::nth_element over all of q (the reference, for tests).
double median_pairwise_distance(const double* U, int64_t m, int64_t d, int n_threads,
                                bool bracket = true);

}  // namespace sc

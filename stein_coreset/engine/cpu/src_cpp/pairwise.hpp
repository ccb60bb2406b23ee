// Pairwise distances of a small point set and their median: the median bandwidth (paper, Sec. 5).
//
// For m points u_0 .. u_{m-1} in R^d (row-major, U[i * d + c]) the N = m (m - 1) / 2 squared
// distances of the pairs i < j are
//
//     q_ij = (...((0 + t_0^2) + t_1^2) + ...) + t_{d-1}^2,    t_c = u_ic - u_jc,
//
// summed coordinate by coordinate in this order, with no fused multiply-add: bit for bit what
// stein_coreset.engine.squared_distances computes with NumPy, and, like it, invariant to a shift
// of the data (no |u|^2 + |v|^2 - 2 u.v expansion). They are stored packed by rows:
// pair (i, j) at row_offset(i, m) + (j - i - 1).
//
// median_pairwise_distance returns numpy.median(sqrt(q)) exactly: the order statistics of sqrt(q)
// are the square roots of those of q (sqrt is correctly rounded and monotone), so with
// a = q_(k_lo), b = q_(k_hi), k_lo = (N - 1) / 2, k_hi = N / 2 (0-based), it is sqrt(b) for odd N
// and (sqrt(a) + sqrt(b)) / 2 for even N, the mean NumPy takes of the two middle values.
//
// Selection runs on the team without storing q: the distances of 16384 evenly spaced pairs give
// two pivots lo <= hi that bracket the two middle ranks with a margin of 4 standard deviations of
// a sample rank; one parallel pass computes the distances row block by row block, counts those
// below lo and keeps those in [lo, hi] (a few per cent of N); std::nth_element finishes on the
// kept ones. When the counts show that the bracket missed (improbable, but the data decide), all
// of q is computed and std::nth_element answers over it. Small N (< 2^16) takes that path
// directly. The value does not depend on n_threads. Cost: O(N d) for the distances, O(N) for
// the selection, O(N) memory only on the fallback path.
#pragma once

#include <cstdint>

namespace sc {

// Offset of pair (i, i + 1) in the packed upper triangle of m points.
inline int64_t row_offset(int64_t i, int64_t m) { return i * (2 * m - i - 1) / 2; }

// q (N = m (m - 1) / 2 entries, packed by rows as above).
void pairwise_sq_distances(const double* U, int64_t m, int64_t d, double* q, int n_threads);

// How median_pairwise_distance selects (the last two for tests): bracketing with the fallback;
// std::nth_element over all of q; bracketing with pivots that miss, so the fallback answers.
enum MedianSelect { kSelectBracket = 0, kSelectAll = 1, kSelectBracketMiss = 2 };

// numpy.median of the N pairwise distances sqrt(q_ij), i < j; m >= 2.
double median_pairwise_distance(const double* U, int64_t m, int64_t d, int n_threads,
                                int select = kSelectBracket);

}  // namespace sc

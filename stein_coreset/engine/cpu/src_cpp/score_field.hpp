// The nearest-neighbour figures of stein_coreset.score_field.score_field_test (is S a score field
// of X?) on m distinct rows, in one call: what the input diagnostics of every compress() cost.
//
// score_field_rows: of k rows of X, S (row-major, k x d) and the k rows before each (rows k ..
// 2k - 1 of the same arrays; the first `no_prev` rows have none), which repeat the row before
// them (equal points: a chain's rejected proposal) and which of those have a different score
// (|s - s_prev| > 1e-6 (|s| + |s_prev|) + 1e-300 in some coordinate): counts = {repeats,
// conflicts}. keep: the rows that differ from the row before them in the first k (row 0 always
// kept); returns their number m.
//
// score_field_figures, on the m rows keep[0 .. m) of X and S (the points and their claimed
// scores):
//
// 1. Robust scale of each column of X: a_c = (x_(hi) - x_(lo)) / 1.349 with the order statistics
//    lo = (m - 1) / 4, hi = 3 (m - 1) / 4 (0-based; numpy.partition's), else the column's sd
//    (population), else 1. Z = X / a, T = S * a (a score transforms as a gradient).
// 2. With `whiten` (the caller's rule: 2 <= d <= score_field.WHITEN_MAX_D and m > 2 d): the
//    covariance C = Y^T Y / m of Y = clip(Z - median(Z), -5, 5) (median per column, numpy.median's:
//    the mean of the two middle values for even m), its Cholesky factor L of C + 1e-9 tr(C) / d I;
//    then z -> L^-1 z (forward substitution) and t -> L^T t. A C that is not positive definite
//    leaves Z, T as they are (as numpy.linalg.cholesky's LinAlgError does in the Python).
// 3. T is divided by the robust scale of its own columns (step 1's rule).
// 4. nn[i]: the nearest other row of Z to row q[i] (rows and q counted among the m kept rows;
//    squared Euclidean distance, summed coordinate by coordinate; ties to the lower row).
// 5. closer = sum over i and k < K of [D_nn < D_k] + [D_nn == D_k] / 2, where D_nn = |T_qi -
//    T_nn[i]|^2 and D_k = |T_qi - T_part[i K + k]|^2 (the random partners, never q[i]).
// 6. For each distinct unordered pair {q[i], nn[i]} = {a, b}: dot = (S_a - S_b) . (X_a - X_b) in
//    the original coordinates; sign = sum of [dot < 0] + [dot == 0] / 2, pairs = their number.
//
// figures = {closer, pairs, sign}. Cost: O(m d^2 + d^3) to whiten, O(q m d) for the neighbours,
// O(q K d) to compare; serial (bounded work: m <= 512 rows and q <= 128 queries by default),
// polling the call's cancellation flag once per block of four queries.
#pragma once

#include <cstdint>

namespace sc {

int64_t score_field_rows(const double* X, const double* S, int64_t k, int64_t d,
                         int64_t no_prev, int64_t* keep, int64_t* counts);

void score_field_figures(const double* X, const double* S, const int64_t* keep, int64_t m,
                         int64_t d, const int64_t* q, int64_t nq, const int64_t* part, int64_t K,
                         bool whiten, int64_t* nn, double* figures);

}  // namespace sc

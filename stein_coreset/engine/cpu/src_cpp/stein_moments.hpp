// The moments of Stein's identity per coordinate (stein_coreset.diagnostics.stein_residuals):
// under P, E[s] = 0 and E[s (x - mu)^T] = -I, and the input diagnostics of every compress() read
// how far a sample and its scores are from that.
//
// For the n x d row-major X (points) and S (scores) and weights w (signed allowed; uniform 1/n
// when w is null), coordinate by coordinate c:
//
//     xbar_c = sum_i w_i x_ic,                 sbar_c = sum_i w_i s_ic,
//     var_x_c = sum_i w_i (x_ic - xbar_c)^2,   var_s_c = sum_i w_i (s_ic - sbar_c)^2,
//     cov_c = sum_i w_i (x_ic - xbar_c) (s_ic - sbar_c),
//
// written to moments[0 .. 5d) as the rows xbar, sbar, var_x, var_s, cov (d each). The noise of
// the mean of cov: with r_i = (1/d) sum_c (x_ic - xbar_c) (s_ic - sbar_c) and rbar = sum_i w_i
// r_i, spread = sum_i |w_i| (r_i - rbar)^2 / sum_i |w_i| (with uniform weights the mean of
// (r_i - mean r)^2), and n_eff = (sum_i |w_i|)^2 / sum_i w_i^2 (n for uniform weights): out[0] =
// spread, out[1] = n_eff.
//
// Two passes over the rows (the means, then the centred products), the sums taken row by row in
// the order of the rows; serial, polling the call's cancellation flag every 4096 rows. O(n d).
#pragma once

#include <cstdint>

namespace sc {

void stein_moments(const double* X, const double* S, const double* w, int64_t n, int64_t d,
                   double* moments, double* out);

}  // namespace sc

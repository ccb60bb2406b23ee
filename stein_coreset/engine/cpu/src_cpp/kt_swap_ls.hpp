// KT-Swap with line search (KT-Swap-LS, Alg. G.2): greedy one-point swaps that lower
// MMD_{k_P}(sum_i w_i delta_{x_i}, P)^2 = w^T K w while keeping the support size.
//
// For each support point i in the given order: remove it (w <- (w - w_i e_i) / (1 - w_i)),
// then add back the best single point k with its exactly line-searched weight t,
// w <- (1 - t) w + t e_k, t = argmin (1-t)^2 D + 2 t (1-t) g_k + t^2 K_kk (clipped to [0, 1]
// for the simplex format). Sufficient statistics g = K w and D = w^T K w make each swap O(n)
// plus two kernel columns (O(n d)). Putting i back with t = w_i reproduces the old weights, so
// the best candidate never increases D; a swap that would (through rounding) is undone.
#pragma once

#include <cstdint>

#include "stein_kernel.hpp"

namespace sc {

enum SwapFormat : int { SPLX = 0, CP = 1 };

// w (n, in/out): dense weights over all n points of K, summing to 1 (non-negative for SPLX).
// order (s): the support points to visit, in order. Returns the final D = w^T K w (tracked).
// Cost: O(n s) kernel evaluations and O(n s) arithmetic.
// One team region: each swap is two steps over fixed blocks of points (the search, its block
// bests combined in order; then the update of w and g), so the result does not depend on
// n_threads.
double kt_swap_ls(const KernelSpec& K, double* w, const int64_t* order, int64_t s, int fmt,
                  int n_threads);

}  // namespace sc

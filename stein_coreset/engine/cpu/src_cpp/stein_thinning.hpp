// Stein Thinning with sufficient statistics (paper Alg. D.1).
//
// The greedy rule picks, at step t, j = argmin_i { k_P(x_i, x_i) + 2 sum_{s<t} k_P(x_i, x_{j_s}) },
// i.e. Alg. D.1's argmin_i { t g_i + k_P(x_i, x_i) } with g = 2 K w; only the running sum of the
// selected columns is kept: O(n m) kernel evaluations, O(n) memory.
#pragma once

#include <cstdint>

#include "stein_kernel.hpp"

namespace sc {

// Greedy Stein thinning: writes m indices (with repeats) into out, in selection order.
// Ties go to the smallest index (as numpy.argmin). If `score` is not null it must hold n values
// and receives the final objective k_P(x_i, x_i) + 2 sum_s k_P(x_i, x_{j_s}).
// One team region for the whole call, sized by a step's work (n kernel entries): each step is one
// parallel pass over fixed chunks and one barrier, whose last arriver takes the first argmin of
// the members' partial argmins (the result does not depend on n_threads).
// Repeated picks read their column from a cache of the columns already evaluated (the same
// values, so the same picks), at most `cache_bytes` of them (negative: kColumnCacheBytes).
void stein_thinning(const KernelSpec& K, int64_t m, int64_t* out, double* score, int n_threads,
                    double cache_bytes = -1.0);

// The default bound on Stein thinning's column cache.
constexpr double kColumnCacheBytes = 256.0 * 1024.0 * 1024.0;

}  // namespace sc

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
// values, so the same picks), at most `cache_bytes` of them (negative: column_cache_bytes).
void stein_thinning(const KernelSpec& K, int64_t m, int64_t* out, double* score, int n_threads,
                    double cache_bytes = -1.0);

// The bound on Stein thinning's column cache.
constexpr double kColumnCacheBytes = 256.0 * 1024.0 * 1024.0;
// The least d at which a cached column pays: reading one back streams 8 n bytes from memory,
// evaluating it reads the points from cache. At n = 2^14, m = n steps (skt's first stage), the
// cache made the loop 0.3-0.6x as fast at d = 2 and 4 and 1.8-2.1x at d = 8 and 10 (11-37x at
// d = 20..100), while at d = 4 it grew to 256 MiB (3339 columns re-picked).
constexpr int64_t kColumnCacheMinD = 8;

// The cache a run of m steps on n points in d dimensions gets: none below kColumnCacheMinD;
// else room for the columns it can re-pick (at most m / 2 distinct points are picked twice),
// at most kColumnCacheBytes. Columns are only allocated as points are picked a second time.
inline double column_cache_bytes(int64_t n, int64_t m, int64_t d) {
    if (d < kColumnCacheMinD) return 0.0;
    const double want = 8.0 * static_cast<double>(n) * static_cast<double>(m / 2);
    return want < kColumnCacheBytes ? want : kColumnCacheBytes;
}

}  // namespace sc

// KT-Swap targeting P (paper Alg. D.3): greedy point swaps that lower MMD_{k_P} of an
// equal-weighted coreset to P, using the sufficient statistic g = sum_j k_P(x_{I_j}, .).
//
// Replacing I_j by i changes m^2 MMD^2 by  Delta_i - Delta_{I_j}  with
//   Delta_i = 2 (g_i - k_P(x_{I_j}, x_i)) + k_P(x_i, x_i),
// so taking i = argmin Delta (which may be I_j itself) never increases the MMD.
// One pass costs 2 m n kernel evaluations (plus m n to form g); O(n) memory.
#pragma once

#include <cstdint>

#include "stein_kernel.hpp"

namespace sc {

// out[l] = sum_{a, b} k_P(x_{C[l m + a]}, x_{C[l m + b]}) = m^2 MMD^2 of coreset l (L coresets).
void coreset_sums(const KernelSpec& K, const int64_t* C, int64_t L, int64_t m, double* out,
                  int n_threads);

// Greedy swaps on I[0..m) in place, `passes` sweeps over the coreset (Alg. D.3 is one sweep;
// a sweep that changes nothing ends early). Returns the number of changed entries.
// sorted_sweeps: sort I before every sweep, so each sweep visits the coreset in increasing index
// order (as goodpoints' kernel_swap does); otherwise sweep the positions 0..m-1 as given.
// Each swap is one step of a team region: one parallel pass over fixed chunks of points (which
// also applies the previous swap's update of g) and one barrier; the first argmin is folded in
// index order, so the result does not depend on n_threads.
int64_t kt_swap_refine(const KernelSpec& K, int64_t* I, int64_t m, int passes, int n_threads,
                       bool sorted_sweeps = false);

}  // namespace sc

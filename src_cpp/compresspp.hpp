// Helpers of KT-Compress++ (paper Alg. F.3) for the unbiased baseline. Plain C++17.
#pragma once

#include <cstdint>

#include "stein_kernel.hpp"

namespace sc {

// out[a] = (1/n) sum_j k(x_{rows[a]}, x_j): the input's mean embedding at nr of its points,
// O(nr n) SIMD-friendly evaluations (parallel over rows), never an nr x n block.
void kernel_row_means(const KernelSpec& K, const int64_t* rows, int64_t nr, double* out,
                      int n_threads);

}  // namespace sc

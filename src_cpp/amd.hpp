// Accelerated entropic mirror descent (paper Alg. F.2) on K' = F F^T + diag(res), fused:
// each step reads the n x r factor F once (the products F^T z and F (F^T z) of the textbook
// form become one pass with r-vector recurrences). Plain C++17, raw pointers + sizes.
#pragma once

#include <cstdint>

namespace sc {

// Runs steps t = t0 + 1, ..., t0 + steps of Alg. F.2 from the state (w_{t0}, v_{t0}) (both
// length n, simplex, overwritten with the state after the last step; at t0 = 0, v = w).
// F: row-major (n, r), stored in single precision (the pass is memory-bound; products are
// accumulated in double); res: (n,) diagonal residual K_ii - |F_i|^2; eta: step size.
// Zero entries of v stay zero. Rows are processed in fixed chunks, run by a team of n_threads
// (parallel.hpp), whose partial sums are merged in order, so the result does not depend on
// n_threads.
void amd_lowrank(const float* F, const double* res, int64_t n, int64_t r, int64_t t0,
                 int64_t steps, double eta, double* w, double* v, int n_threads);

}  // namespace sc

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

// The quadratic form c^T K'_JJ c of K' = F F^T + diag(res) on the rows J = idx[0..m) (all n
// rows, in order, when idx is null; then m = n): |F_J^T c|^2 + sum_a res_{J_a} c_a^2, O(m r).
// F is (n, r) with element strides (si, sk): the transpose of a C-ordered (r, n) array (as
// weighted RPCholesky builds it) has si = 1, sk = n. Rows are summed in fixed chunks whose
// partials are merged in order, so the value does not depend on n_threads. Computing it here
// keeps the Low-rank Debiasing stopping rule off the BLAS, whose own threads (OpenBLAS) spin
// after each call and take the cores of the AMD team.
double lowrank_quad(const double* F, int64_t si, int64_t sk, const double* res, int64_t n,
                    int64_t r, const double* c, const int64_t* idx, int64_t m, int n_threads);

// The diagonal residual res_i = diag_i - sum_k F_ik^2 of K' (k summed in increasing order;
// on x86-64 each square rounded before it is added, a target with FMA in its baseline may fuse
// them), F with element strides (si, sk) as in lowrank_quad. Each row on its own, so the values
// do not depend on n_threads. O(n r).
void lowrank_residual(const double* F, int64_t si, int64_t sk, int64_t n, int64_t r,
                      const double* diag, double* res, int n_threads);

// F rounded to single precision at a power-of-two scale: e is the exponent of max|F| (frexp:
// 2^-e max|F| in [0.5, 1); e = 0 when F is zero, empty or not finite) and G = float(2^-e F),
// row-major (n, r), what amd_lowrank reads. F has element strides (si, sk) as in lowrank_quad.
// Every entry is rounded on its own and the maximum does not depend on an order, so G and e do
// not depend on n_threads (nor on the chunks: they equal NumPy's multiply-and-cast). O(n r).
int factor32(const double* F, int64_t si, int64_t sk, int64_t n, int64_t r, float* G,
             int n_threads);

}  // namespace sc

// Evaluation of a P-mean-zero kernel k_P on n fixed points, O(d) per entry (App. I.1).
//
// Points are stored whitened: U = rows L^{-1} x_i and T = rows L^T s_i with M = L L^T, so
//   ||x_i - x_j||_M^2 = ||u_i - u_j||^2  and  <s_i, M s_j> = <t_i, t_j>.
// For a radial base kernel k(x, y) = kappa(q), q = ||x - y||_M^2, the Stein kernel (Prop. B.5) is
//   k_p = kappa <t_i, t_j> - 2 kappa' <u_i - u_j, t_i - t_j> - 4 q kappa'' - 2 d kappa'.
// Without scores (T == nullptr) the kernel is the base kernel; with `mean` it is centred:
//   k(x_i, x_j) - mean_i - mean_j + mean_all  (the unbiased baselines, paper footnote 2).
#pragma once

#include <cmath>
#include <cstdint>

namespace sc {

// The base kernels (BaseKind: IMQ, GAUSSIAN, MATERN15, MATERN25) and SC_SWITCH_BASE, listed
// once in base_kernels.inc.
#include "base_kernels.inc"

// Their names and codes, for the Python side (_core.BASE_KERNEL_CODES).
struct BaseKernelName {
    const char* name;
    int code;
};
#define SC_BASE_NAME_(ID, CODE, NAME, RADIAL) {NAME, CODE},
inline constexpr BaseKernelName kBaseKernels[] = {SC_BASE_KERNELS(SC_BASE_NAME_)};
#undef SC_BASE_NAME_
inline constexpr int kNumBaseKernels =
    static_cast<int>(sizeof(kBaseKernels) / sizeof(kBaseKernels[0]));

constexpr bool base_codes_consecutive() {
    for (int i = 0; i < kNumBaseKernels; ++i)
        if (kBaseKernels[i].code != i) return false;
    return true;
}
// the Python boundary accepts the codes 0 <= code < kNumBaseKernels
static_assert(base_codes_consecutive(), "base_kernels.inc: the codes must be 0, 1, 2, ... in order");

struct KernelSpec {
    int base = IMQ;
    double sigma = 1.0;
    double beta = -0.5;        // IMQ exponent
    int64_t n = 0;
    int64_t d = 0;
    const double* U = nullptr;     // n x d, row-major
    const double* T = nullptr;     // n x d or nullptr
    const double* mean = nullptr;  // n or nullptr
    double mean_all = 0.0;
    // structure-of-arrays copies (coordinate c of point i at Us[c * scap + i]), built once by the
    // owner of the points (the Python handle); nullptr: the evaluator copies U / T itself
    const double* Us = nullptr;    // d x scap or nullptr
    const double* Ts = nullptr;    // d x scap or nullptr
    int64_t scap = 0;              // their row stride, >= n (soa_capacity(n))
};

// The row stride of a structure-of-arrays copy of n points: n rounded up to whole cache lines,
// and off multiples of 4 KiB, whose strides map every coordinate of a slot to the same cache
// sets (at n = 2^13 and d = 100 the 200 coordinate streams of a block then evict each other).
inline int64_t soa_capacity(int64_t n) {
    int64_t cap = (n + 7) / 8 * 8;
    if (cap % 512 == 0) cap += 8;
    return cap;
}

struct Radial {
    double k0;   // kappa(q)
    double k1;   // kappa'(q)
    double qk2;  // q kappa''(q), finite at q = 0 for every supported base
};

namespace portable {
#define SC_TARGET
#include "radial.inc"
#undef SC_TARGET
}  // namespace portable

// (kappa, kappa', q kappa'') of the base kernel `base` at q (radial.inc), for scalar callers.
inline Radial radial(int base, double sigma, double beta, double q) {
    Radial r;
    portable::radial_at(base, sigma, beta, q, r.k0, r.k1, r.qk2);
    return r;
}

// The evaluator of these formulas is soa_kernel.hpp's (one for the whole library), with its dense
// front ends (gram, diag, kernel_column, kernel_row_means, soa_matvec).

}  // namespace sc

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

enum BaseKind : int { IMQ = 0, GAUSSIAN = 1, MATERN15 = 2, MATERN25 = 3 };

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
    // structure-of-arrays copies (coordinate c of point i at Us[c * n + i]), built once by the
    // owner of the points (the Python handle); nullptr: the evaluator copies U / T itself
    const double* Us = nullptr;    // d x n or nullptr
    const double* Ts = nullptr;    // d x n or nullptr
};

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
    switch (base) {
        case GAUSSIAN: portable::radial_local<GAUSSIAN>(sigma, beta, q, r.k0, r.k1, r.qk2); break;
        case MATERN15: portable::radial_local<MATERN15>(sigma, beta, q, r.k0, r.k1, r.qk2); break;
        case MATERN25: portable::radial_local<MATERN25>(sigma, beta, q, r.k0, r.k1, r.qk2); break;
        default: portable::radial_local<IMQ>(sigma, beta, q, r.k0, r.k1, r.qk2); break;
    }
    return r;
}

// The evaluator of these formulas is soa_kernel.hpp's (one for the whole library), with its dense
// front ends (gram, diag, kernel_column, kernel_row_means, soa_matvec).

}  // namespace sc

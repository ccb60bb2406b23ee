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

inline Radial radial(int base, double sigma, double beta, double q) {
    Radial r;
    const double s2 = sigma * sigma;
    switch (base) {
        case GAUSSIAN: {
            r.k0 = std::exp(-q / (2.0 * s2));
            r.k1 = -r.k0 / (2.0 * s2);
            r.qk2 = q * r.k0 / (4.0 * s2 * s2);
            break;
        }
        case MATERN15: {
            const double a = std::sqrt(3.0) / sigma, rr = std::sqrt(q), e = std::exp(-a * rr);
            r.k0 = (1.0 + a * rr) * e;
            r.k1 = -0.5 * a * a * e;
            r.qk2 = 0.25 * a * a * a * rr * e;
            break;
        }
        case MATERN25: {
            const double a = std::sqrt(5.0) / sigma, rr = std::sqrt(q), e = std::exp(-a * rr);
            r.k0 = (1.0 + a * rr + a * a * q / 3.0) * e;
            r.k1 = -(a * a / 6.0) * (1.0 + a * rr) * e;
            r.qk2 = (a * a * a * a / 12.0) * q * e;
            break;
        }
        default: {  // IMQ
            const double b = 1.0 + q / s2;
            double p;  // b^(beta - 2)
            if (beta == -0.5) {
                const double ib = 1.0 / b;
                p = std::sqrt(ib) * ib * ib;
            } else {
                p = std::pow(b, beta - 2.0);
            }
            r.k0 = p * b * b;
            r.k1 = beta / s2 * p * b;
            r.qk2 = q * beta * (beta - 1.0) / (s2 * s2) * p;
            break;
        }
    }
    return r;
}

// The evaluator of these formulas is soa_kernel.hpp's (one for the whole library); the functions
// below are its dense front ends.

// out[a * nc + b] = k_P(rows[a], cols[b]); cols == nullptr means all n columns (nc = n).
// A row over all n columns is bit-identical to kernel_column of that row.
void gram(const KernelSpec& K, const int64_t* rows, int64_t nr, const int64_t* cols, int64_t nc,
          double* out, int n_threads);

// out[i] = k_P(i, i) for all n points.
void diag(const KernelSpec& K, double* out, int n_threads);


}  // namespace sc

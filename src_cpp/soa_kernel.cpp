#include "soa_kernel.hpp"

#include <algorithm>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
// an AVX2/FMA clone chosen at load time where the CPU has it (plain SSE2 build otherwise)
#define SC_CLONES __attribute__((target_clones("arch=haswell", "default")))
#define SC_INLINE inline __attribute__((always_inline))
#else
#define SC_CLONES
#define SC_INLINE inline
#endif

namespace sc {

namespace {

template <int BASE>
SC_INLINE void finish(const KernelSpec& K, const double* q, const double* tt, const double* ut,
                   int64_t len, double* out) {
    const double s2 = K.sigma * K.sigma, beta = K.beta;
    const double dd = 2.0 * static_cast<double>(K.d);
    const bool stein = K.T != nullptr;
    if (BASE == IMQ && beta == -0.5) {
        // kappa = bb^(-1/2), kappa' = (beta / s2) bb^(-3/2), q kappa'' = q beta (beta - 1) / s2^2
        // bb^(-5/2) with bb = 1 + q / s2: one square root and one division per entry
        const double is2 = 1.0 / s2, c1 = beta * is2, c2 = beta * (beta - 1.0) * is2 * is2;
        if (stein) {
#pragma omp simd
            for (int64_t b = 0; b < len; ++b) {
                const double k0 = 1.0 / std::sqrt(1.0 + q[b] * is2), ib = k0 * k0;
                const double k1 = c1 * k0 * ib, qk2 = q[b] * c2 * k0 * ib * ib;
                out[b] = k0 * tt[b] - 2.0 * k1 * ut[b] - 4.0 * qk2 - dd * k1;
            }
        } else {
#pragma omp simd
            for (int64_t b = 0; b < len; ++b) out[b] = 1.0 / std::sqrt(1.0 + q[b] * is2);
        }
        return;
    }
    for (int64_t b = 0; b < len; ++b) {
        const Radial r = radial(BASE, K.sigma, beta, q[b]);
        out[b] = stein ? r.k0 * tt[b] - 2.0 * r.k1 * ut[b] - 4.0 * r.qk2 - dd * r.k1 : r.k0;
    }
}

template <int BASE>
SC_INLINE void eval_block(const KernelSpec& K, int64_t i, const SoAPoints& P, int64_t a, int64_t e,
                double* out) {
    const int64_t d = K.d, len = e - a, cap = P.cap;
    alignas(64) double q[kSoABlock], tt[kSoABlock], ut[kSoABlock];
    const double* ui = K.U + i * d;
    for (int64_t b = 0; b < len; ++b) q[b] = 0.0;
    if (P.stein) {
        const double* ti = K.T + i * d;
        for (int64_t b = 0; b < len; ++b) tt[b] = ut[b] = 0.0;
        for (int64_t c = 0; c < d; ++c) {
            const double* U = P.U.data() + c * cap + a;
            const double* T = P.T.data() + c * cap + a;
            const double uc = ui[c], tc = ti[c];
#pragma omp simd
            for (int64_t b = 0; b < len; ++b) {
                const double du = uc - U[b];
                q[b] += du * du;
                tt[b] += tc * T[b];
                ut[b] += du * (tc - T[b]);
            }
        }
    } else {
        for (int64_t c = 0; c < d; ++c) {
            const double* U = P.U.data() + c * cap + a;
            const double uc = ui[c];
#pragma omp simd
            for (int64_t b = 0; b < len; ++b) {
                const double du = uc - U[b];
                q[b] += du * du;
            }
        }
    }
    finish<BASE>(K, q, tt, ut, len, out);
    if (P.centred) {
        const double mi = K.mean_all - K.mean[i];
        const double* mb = P.mean.data() + a;
#pragma omp simd
        for (int64_t b = 0; b < len; ++b) out[b] += mi - mb[b];
    }
}

}  // namespace

SC_CLONES void soa_eval(const KernelSpec& K, int64_t i, const SoAPoints& P, int64_t a, int64_t e,
              double* out) {
    switch (K.base) {
        case GAUSSIAN: eval_block<GAUSSIAN>(K, i, P, a, e, out); break;
        case MATERN15: eval_block<MATERN15>(K, i, P, a, e, out); break;
        case MATERN25: eval_block<MATERN25>(K, i, P, a, e, out); break;
        default: eval_block<IMQ>(K, i, P, a, e, out); break;
    }
}

double soa_sum(const KernelSpec& K, int64_t i, const SoAPoints& P, int64_t a, int64_t e) {
    alignas(64) double buf[kSoABlock];
    double s = 0.0;
    for (int64_t b0 = a; b0 < e; b0 += kSoABlock) {
        const int64_t b1 = std::min(e, b0 + kSoABlock);
        soa_eval(K, i, P, b0, b1, buf);
        for (int64_t b = 0; b < b1 - b0; ++b) s += buf[b];
    }
    return s;
}

}  // namespace sc

#include "amd.hpp"

#include "isa.hpp"

#include "cancel.hpp"
#include "parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>


namespace sc {

namespace {
constexpr int64_t kRows = 2048;  // rows per chunk (fixed: results independent of team size)

// <F_i, u> with 8 independent accumulators (a single one is a latency chain the compiler may
// not reorder); a fixed order, so the value does not depend on the build's vector width.
// One chunk of one AMD step: g_i = F_i . u, the log-domain mirror update of v_i, and the
// online-max accumulation of sum_i v_i F_i. Compiled for AVX2+FMA and for the baseline ISA and
// picked at run time (the float -> double loops are compute-bound at SSE2 width).
#define SC_AMD_CHUNK_BODY                                                                         \
    {                                                                                             \
        std::fill(a, a + r, 0.0);                                                                 \
        double M = ninf, s = 0.0;                                                                 \
        for (int64_t i = i0; i < i1; ++i) {                                                       \
            if (logv[i] == ninf) continue;                                                        \
            const float* Fi = F + i * r;                                                          \
            double acc8[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                            \
            int64_t k = 0;                                                                        \
            for (; k + 8 <= r; k += 8)                                                            \
                for (int j = 0; j < 8; ++j) acc8[j] += static_cast<double>(Fi[k + j]) * u[k + j]; \
            double g = ((acc8[0] + acc8[1]) + (acc8[2] + acc8[3])) +                              \
                       ((acc8[4] + acc8[5]) + (acc8[6] + acc8[7]));                               \
            for (; k < r; ++k) g += static_cast<double>(Fi[k]) * u[k];                            \
            const double zi = (1.0 - beta) * w[i] + beta * v[i];                                  \
            const double lv = logv[i] - cst * (g + res[i] * zi);                                  \
            logv[i] = lv;                                                                         \
            if (lv > M) {                                                                         \
                const double f = std::exp(M - lv);                                                \
                s *= f;                                                                           \
                for (int64_t kk = 0; kk < r; ++kk) a[kk] *= f;                                    \
                M = lv;                                                                           \
            }                                                                                     \
            const double e = std::exp(lv - M);                                                    \
            s += e;                                                                               \
            for (int64_t kk = 0; kk < r; ++kk) a[kk] += e * static_cast<double>(Fi[kk]);          \
        }                                                                                         \
        *pM = M;                                                                                  \
        *ps = s;                                                                                  \
    }

#define SC_AMD_CHUNK_ARGS                                                                      \
    const float *F, const double *res, const double *w, const double *v, double *logv,         \
        const double *u, int64_t r, int64_t i0, int64_t i1, double beta, double cst, double *a, \
        double *pM, double *ps, double ninf

#ifdef SC_MULTI_ISA
__attribute__((target("avx2,fma"))) void chunk_avx2(SC_AMD_CHUNK_ARGS) SC_AMD_CHUNK_BODY
#endif

void chunk_base(SC_AMD_CHUNK_ARGS) SC_AMD_CHUNK_BODY

using ChunkFn = void (*)(SC_AMD_CHUNK_ARGS);

ChunkFn pick_chunk() {
#ifdef SC_MULTI_ISA
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return chunk_avx2;
#endif
    return chunk_base;
}
}  // namespace

void amd_lowrank(const float* F, const double* res, int64_t n, int64_t r, int64_t t0,
                 int64_t steps, double eta, double* w, double* v, int n_threads) {
    const ChunkFn chunk = pick_chunk();
    Team team(n_threads);
    const bool par = n * (r + 1) > kParallelWork;
    const double ninf = -std::numeric_limits<double>::infinity();
    const int64_t nch = (n + kRows - 1) / kRows;
    std::vector<double> logv(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) logv[i] = v[i] > 0.0 ? std::log(v[i]) : ninf;
    // per-chunk partials: F^T w, F^T v at the start; then (max, sum, F^T e) every step
    std::vector<double> pacc(static_cast<size_t>(nch * r)), pacc2(static_cast<size_t>(nch * r)),
        pM(static_cast<size_t>(nch)), ps(static_cast<size_t>(nch));
    std::vector<double> Ftw(static_cast<size_t>(r), 0.0), Ftv(static_cast<size_t>(r), 0.0),
        u(static_cast<size_t>(r)), acc(static_cast<size_t>(r));
    team.for_chunks(nch, [&](int64_t c) {
        double* a = pacc.data() + c * r;
        double* b = pacc2.data() + c * r;
        std::fill(a, a + r, 0.0);
        std::fill(b, b + r, 0.0);
        for (int64_t i = c * kRows; i < std::min(n, (c + 1) * kRows); ++i) {
            if (w[i] == 0.0 && v[i] == 0.0) continue;
            const float* Fi = F + i * r;
            for (int64_t k = 0; k < r; ++k) {
                a[k] += w[i] * static_cast<double>(Fi[k]);
                b[k] += v[i] * static_cast<double>(Fi[k]);
            }
        }
    }, par);
    for (int64_t c = 0; c < nch; ++c)
        for (int64_t k = 0; k < r; ++k) {
            Ftw[k] += pacc[c * r + k];
            Ftv[k] += pacc2[c * r + k];
        }
    for (int64_t t = t0 + 1; t <= t0 + steps; ++t) {
        poll_cancel();
        const double beta = 2.0 / static_cast<double>(t + 1);
        const double cst = 2.0 * static_cast<double>(t) * eta;
        // u = F^T z_t with z_t = (1 - beta) w_{t-1} + beta v_{t-1}
        for (int64_t k = 0; k < r; ++k) u[k] = (1.0 - beta) * Ftw[k] + beta * Ftv[k];
        team.for_chunks(nch, [&](int64_t c) {
            chunk(F, res, w, v, logv.data(), u.data(), r, c * kRows, std::min(n, (c + 1) * kRows),
                  beta, cst, pacc.data() + c * r, pM.data() + c, ps.data() + c, ninf); }, par);
        double M = ninf;
        for (int64_t c = 0; c < nch; ++c) M = std::max(M, pM[c]);
        double s = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t c = 0; c < nch; ++c) {
            if (pM[c] == ninf) continue;
            const double f = std::exp(pM[c] - M);
            s += f * ps[c];
            for (int64_t k = 0; k < r; ++k) acc[k] += f * pacc[c * r + k];
        }
        // v_t = e / s (normalised in the log domain), w_t = (1 - beta) w_{t-1} + beta v_t
        const double lnorm = M + std::log(s);
        team.for_chunks(nch, [&](int64_t c) {
        for (int64_t i = c * kRows; i < std::min(n, (c + 1) * kRows); ++i) {
            if (logv[i] == ninf) {  // v_i = 0 (off the support, or underflowed): w_i decays
                w[i] *= 1.0 - beta;
                continue;
            }
            logv[i] -= lnorm;
            v[i] = std::exp(logv[i]);
            w[i] = (1.0 - beta) * w[i] + beta * v[i];
        } }, par);
        for (int64_t k = 0; k < r; ++k) {
            Ftv[k] = acc[k] / s;
            Ftw[k] = (1.0 - beta) * Ftw[k] + beta * Ftv[k];
        }
    }
}

}  // namespace sc

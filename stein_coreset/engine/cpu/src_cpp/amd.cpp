#include "amd.hpp"

#include "isa.hpp"

#include "parallel.hpp"

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>


namespace sc {

namespace {
// rows per chunk (fixed: results independent of team size); small enough that n = 2^12 has 8
// chunks, so a member that wakes late for a step still finds chunks of its own to run
constexpr int64_t kRows = 512;

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
    const double ninf = -std::numeric_limits<double>::infinity();
    const int64_t nch = (n + kRows - 1) / kRows;
    // a step reads F once (n r floats, two passes over each row in cache) and takes an exp per
    // row: ~0.5 ns per entry of F on one core (team_members weighs it against the barriers)
    const int M = team.members_for(0.5 * static_cast<double>(n * (r + 4)), nch,
                                   std::max<int64_t>(steps, 1));
    std::unique_ptr<double[]> logv_(new double[static_cast<size_t>(n)]);  // no zero-fill
    double* logv = logv_.get();
    // per-chunk partials: F^T w, F^T v at the start; then (max, sum, F^T e) every step
    std::vector<double> pacc(static_cast<size_t>(nch * r)), pacc2(static_cast<size_t>(nch * r)),
        pM(static_cast<size_t>(nch)), ps(static_cast<size_t>(nch));
    std::vector<double> Ftw(static_cast<size_t>(r), 0.0), Ftv(static_cast<size_t>(r), 0.0),
        u(static_cast<size_t>(r)), acc(static_cast<size_t>(r));
    // the members' rows: logv first touched by the member that owns them (NUMA), and F^T w,
    // F^T v in per-chunk partials
    team.for_chunks_on(M, nch, [&](int64_t c) {
        double* a = pacc.data() + c * r;
        double* b = pacc2.data() + c * r;
        std::fill(a, a + r, 0.0);
        std::fill(b, b + r, 0.0);
        for (int64_t i = c * kRows; i < std::min(n, (c + 1) * kRows); ++i) {
            logv[i] = v[i] > 0.0 ? std::log(v[i]) : ninf;
            if (w[i] == 0.0 && v[i] == 0.0) continue;
            const float* Fi = F + i * r;
            for (int64_t k = 0; k < r; ++k) {
                a[k] += w[i] * static_cast<double>(Fi[k]);
                b[k] += v[i] * static_cast<double>(Fi[k]);
            }
        }
    });
    for (int64_t c = 0; c < nch; ++c)
        for (int64_t k = 0; k < r; ++k) {
            Ftw[k] += pacc[c * r + k];
            Ftv[k] += pacc2[c * r + k];
        }
    if (steps <= 0) return;
    // v_t = e / s (normalised in the log domain), w_t = (1 - beta) w_{t-1} + beta v_t, on rows
    // [i0, i1): the end of step t, run by the same chunk at the start of step t + 1
    auto normalise = [&](int64_t i0, int64_t i1, double beta, double lnorm) {
        for (int64_t i = i0; i < i1; ++i) {
            if (logv[i] == ninf) {  // v_i = 0 (off the support, or underflowed): w_i decays
                w[i] *= 1.0 - beta;
                continue;
            }
            logv[i] -= lnorm;
            v[i] = std::exp(logv[i]);
            w[i] = (1.0 - beta) * w[i] + beta * v[i];
        }
    };
    // state published by each step's combine for the next: u = F^T z_{t+1}, and the
    // normalisation of step t that the next step's chunks apply to their rows first
    double prev_beta = 0.0, prev_lnorm = 0.0;
    auto beta_of = [](int64_t t) { return 2.0 / static_cast<double>(t + 1); };
    auto set_u = [&](int64_t t) {  // u = F^T z_t with z_t = (1 - beta) w_{t-1} + beta v_{t-1}
        const double beta = beta_of(t);
        for (int64_t k = 0; k < r; ++k) u[k] = (1.0 - beta) * Ftw[k] + beta * Ftv[k];
    };
    set_u(t0 + 1);
    // one region step per AMD step, one barrier each
    team.steps(
        M, steps, [nch](int64_t) { return nch; },
        [&](int64_t s, int64_t c, int) {
            const int64_t t = t0 + 1 + s, i0 = c * kRows, i1 = std::min(n, i0 + kRows);
            if (s > 0) normalise(i0, i1, prev_beta, prev_lnorm);
            chunk(F, res, w, v, logv, u.data(), r, i0, i1, beta_of(t),
                  2.0 * static_cast<double>(t) * eta, pacc.data() + c * r, pM.data() + c,
                  ps.data() + c, ninf);
        },
        [&](int64_t s) {
            const int64_t t = t0 + 1 + s;
            const double beta = beta_of(t);
            double M_ = ninf;
            for (int64_t c = 0; c < nch; ++c) M_ = std::max(M_, pM[c]);
            double sum = 0.0;
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t c = 0; c < nch; ++c) {
                if (pM[c] == ninf) continue;
                const double f = std::exp(pM[c] - M_);
                sum += f * ps[c];
                for (int64_t k = 0; k < r; ++k) acc[k] += f * pacc[c * r + k];
            }
            prev_beta = beta;
            prev_lnorm = M_ + std::log(sum);
            for (int64_t k = 0; k < r; ++k) {
                Ftv[k] = acc[k] / sum;
                Ftw[k] = (1.0 - beta) * Ftw[k] + beta * Ftv[k];
            }
            if (s + 1 < steps) set_u(t + 1);
            return true;
        });
    // the last step's normalisation
    team.for_chunks_on(M, nch, [&](int64_t c) {
        normalise(c * kRows, std::min(n, (c + 1) * kRows), prev_beta, prev_lnorm);
    });
}

namespace {
// a[k] = sum over q in [a0, a1) of F[J_q + k sk] c[q], in increasing q from 0 (J_q = q when idx
// is null), for the k < r of a column-contiguous F: kCols independent sums side by side (one
// is a latency chain; each keeps its own order, so the values are the one-column loop's)
void column_sums(const double* F, int64_t sk, int64_t r, const double* c, const int64_t* idx,
                 int64_t a0, int64_t a1, double* a) {
    constexpr int64_t kCols = 8;
    int64_t k = 0;
    for (; k + kCols <= r; k += kCols) {
        const double* Fk = F + k * sk;
        double acc[kCols] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t q = a0; q < a1; ++q) {
            const double* Fq = Fk + (idx == nullptr ? q : idx[q]);
            const double cq = c[q];
            for (int64_t j = 0; j < kCols; ++j) acc[j] += Fq[j * sk] * cq;
        }
        for (int64_t j = 0; j < kCols; ++j) a[k + j] = acc[j];
    }
    for (; k < r; ++k) {
        const double* Fk = F + k * sk;
        double acc = 0.0;
        for (int64_t q = a0; q < a1; ++q) acc += Fk[idx == nullptr ? q : idx[q]] * c[q];
        a[k] = acc;
    }
}

// body(i, k) for the rows i in [i0, i1) and columns k < r, along F's shorter stride inside
template <class Body>
void each_entry(int64_t si, int64_t sk, int64_t r, int64_t i0, int64_t i1, Body&& body) {
    if (std::abs(si) <= std::abs(sk)) {
        for (int64_t k = 0; k < r; ++k)
            for (int64_t i = i0; i < i1; ++i) body(i, k);
    } else {
        for (int64_t i = i0; i < i1; ++i)
            for (int64_t k = 0; k < r; ++k) body(i, k);
    }
}
}  // namespace

void lowrank_residual(const double* F, int64_t si, int64_t sk, int64_t n, int64_t r,
                      const double* diag, double* res, int n_threads) {
    if (n <= 0) return;
    const int64_t nch = (n + kRows - 1) / kRows;
    Team team(n_threads);
    const int M = team.members_for(0.5 * static_cast<double>(n) * static_cast<double>(r), nch, 1);
    team.for_chunks_on(M, nch, [&](int64_t ch) {
        const int64_t i0 = ch * kRows, i1 = std::min(n, i0 + kRows);
        double acc[kRows];
        std::fill(acc, acc + (i1 - i0), 0.0);
        each_entry(si, sk, r, i0, i1, [&](int64_t i, int64_t k) {
            const double f = F[i * si + k * sk];
            acc[i - i0] += f * f;  // unfused on x86-64 (no FMA in its baseline ISA)
        });
        for (int64_t i = i0; i < i1; ++i) res[i] = diag[i] - acc[i - i0];
    });
}

int factor32(const double* F, int64_t si, int64_t sk, int64_t n, int64_t r, float* G,
             int n_threads) {
    if (n <= 0 || r <= 0) return 0;
    const int64_t nch = (n + kRows - 1) / kRows;
    Team team(n_threads);
    const int M = team.members_for(0.5 * static_cast<double>(n) * static_cast<double>(r), nch, 1);
    // per chunk: max|F| over its rows, and whether one of them is NaN
    std::vector<double> top(static_cast<size_t>(nch), 0.0);
    std::vector<char> nan(static_cast<size_t>(nch), 0);
    team.for_chunks_on(M, nch, [&](int64_t ch) {
        const int64_t i0 = ch * kRows, i1 = std::min(n, i0 + kRows);
        double t = 0.0;
        bool bad = false;
        each_entry(si, sk, r, i0, i1, [&](int64_t i, int64_t k) {
            const double x = std::fabs(F[i * si + k * sk]);
            bad |= x != x;
            t = x > t ? x : t;
        });
        top[ch] = t;
        nan[ch] = bad;
    });
    double t = 0.0;
    bool bad = false;
    for (int64_t ch = 0; ch < nch; ++ch) {
        t = std::max(t, top[ch]);
        bad |= nan[ch] != 0;
    }
    int e = 0;
    if (!bad && t > 0.0 && t < std::numeric_limits<double>::infinity()) std::frexp(t, &e);
    const double scale = std::ldexp(1.0, -e);
    team.for_chunks_on(M, nch, [&](int64_t ch) {
        const int64_t i0 = ch * kRows, i1 = std::min(n, i0 + kRows);
        each_entry(si, sk, r, i0, i1, [&](int64_t i, int64_t k) {
            G[i * r + k] = static_cast<float>(F[i * si + k * sk] * scale);
        });
    });
    return e;
}

double lowrank_quad(const double* F, int64_t si, int64_t sk, const double* res, int64_t n,
                    int64_t r, const double* c, const int64_t* idx, int64_t m, int n_threads) {
    if (idx == nullptr) m = n;
    if (m <= 0) return 0.0;
    const int64_t nch = (m + kRows - 1) / kRows;
    // per chunk: its partial F_J^T c (r entries) and sum res c^2 (one more)
    std::vector<double> part(static_cast<size_t>(nch * (r + 1)), 0.0);
    Team team(n_threads);
    // ns per entry, measured at n = 2^16, r = 85: streamed 0.5; gathered across columns (rows J
    // of a column-contiguous F: a cache line per entry) about 5
    const double per_entry = idx != nullptr && si == 1 ? 4.0 : 0.5;
    const double ns = per_entry * static_cast<double>(m) * static_cast<double>(r + 1);
    const int M = team.members_for(ns, nch, 1);  // a one-off loop: it pays for its wake-up
    team.for_chunks_on(M, nch, [&](int64_t ch) {
        double* a = part.data() + ch * (r + 1);
        const int64_t a0 = ch * kRows, a1 = std::min(m, a0 + kRows);
        // each entry of a sums its rows in increasing a, from 0, whichever loop is outside
        if (si == 1) {  // columns of F contiguous: kCols columns at a time outside, rows inside
            column_sums(F, sk, r, c, idx, a0, a1, a);
        } else {
            for (int64_t q = a0; q < a1; ++q) {
                const int64_t i = idx == nullptr ? q : idx[q];
                const double* Fi = F + i * si;
                for (int64_t k = 0; k < r; ++k) a[k] += Fi[k * sk] * c[q];
            }
        }
        double d = 0.0;
        for (int64_t q = a0; q < a1; ++q) {
            const int64_t i = idx == nullptr ? q : idx[q];
            d += res[i] * c[q] * c[q];
        }
        a[r] = d;
    });
    std::vector<double> Ftc(static_cast<size_t>(r), 0.0);
    double diag = 0.0;
    for (int64_t ch = 0; ch < nch; ++ch) {
        const double* a = part.data() + ch * (r + 1);
        for (int64_t k = 0; k < r; ++k) Ftc[k] += a[k];
        diag += a[r];
    }
    double sq = 0.0;
    for (int64_t k = 0; k < r; ++k) sq += Ftc[k] * Ftc[k];
    return sq + diag;
}

}  // namespace sc

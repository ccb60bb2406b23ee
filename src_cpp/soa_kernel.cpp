#include "soa_kernel.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "isa.hpp"
#include "parallel.hpp"

// The evaluator is also built for AVX-512 and AVX2+FMA (isa.hpp) and the widest one the CPU
// supports is picked at first use.
#ifdef SC_MULTI_ISA
#include <immintrin.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
// the block buffers are written up to `len` before being read; GCC cannot see that through the
// vector loads of the AVX-512 path
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace sc {

#ifdef SC_MULTI_ISA
namespace isa_avx512 {
// 256-bit vectors, which run faster than 512-bit ones for this sqrt/div-bound loop
#if defined(__clang__)
#define SC_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl,avx512dq,avx512bw")))
#else
#define SC_TARGET \
    __attribute__((target("avx2,fma,avx512f,avx512vl,avx512dq,avx512bw,prefer-vector-width=256")))
#endif
#define SC_RSQRT14 1
#include "soa_kernel_impl.inc"
#undef SC_RSQRT14
#undef SC_TARGET
}  // namespace isa_avx512
namespace isa_avx2 {
#define SC_TARGET __attribute__((target("avx2,fma")))
#include "soa_kernel_impl.inc"
#undef SC_TARGET
}  // namespace isa_avx2
#endif
namespace isa_base {
#define SC_TARGET
#include "soa_kernel_impl.inc"
#undef SC_TARGET
}  // namespace isa_base

namespace {

using EvalFn = void (*)(const KernelSpec&, int64_t, const SoAView&, int64_t, int64_t, double*);

EvalFn pick() {
#ifdef SC_MULTI_ISA
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return isa_avx512::eval_block;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return isa_avx2::eval_block;
    }
#endif
    return isa_base::eval_block;
}

const EvalFn kEval = pick();

}  // namespace

void soa_eval(const KernelSpec& K, int64_t i, const SoAView& P, int64_t a, int64_t e,
              double* out) {
    kEval(K, i, P, a, e, out);
}

double soa_sum(const KernelSpec& K, int64_t i, const SoAView& P, int64_t a, int64_t e) {
    alignas(64) double buf[kSoABlock];
    double s = 0.0;
    for (int64_t b0 = a; b0 < e; b0 += kSoABlock) {
        const int64_t b1 = std::min(e, b0 + kSoABlock);
        kEval(K, i, P, b0, b1, buf);
        for (int64_t b = 0; b < b1 - b0; ++b) s += buf[b];
    }
    return s;
}

double soa_entry(const KernelSpec& K, int64_t i, int64_t j) {
    // point j of the row-major arrays is a structure-of-arrays view of capacity 1
    const SoAView one{K.d, 1, K.U + j * K.d, K.T ? K.T + j * K.d : nullptr,
                      K.mean ? K.mean + j : nullptr};
    double v;
    kEval(K, i, one, 0, 1, &v);
    return v;
}

void soa_matvec(const KernelSpec& K, const double* w, double* out, int n_threads) {
    const AllPoints all(K);
    const SoAView& P = all.view();
    const int64_t n = K.n;
    constexpr int64_t kRows = 8;
    const int64_t nch = (n + kRows - 1) / kRows;
    Team team(n_threads);
    team.for_chunks_on(
        team.members_for(static_cast<double>(n) * static_cast<double>(n) * entry_ns(K.d), nch, 1),
        nch,
        [&](int64_t c) {
            alignas(64) double buf[kSoABlock];
            for (int64_t i = c * kRows; i < std::min(n, (c + 1) * kRows); ++i) {
                double s = 0.0;
                for (int64_t a = 0; a < n; a += kSoABlock) {
                    const int64_t e = std::min(n, a + kSoABlock);
                    kEval(K, i, P, a, e, buf);
                    for (int64_t b = 0; b < e - a; ++b) s += buf[b] * w[a + b];
                }
                out[i] = s;
            }
        });
}

namespace {
// f(b0, len): row i's entries k_P(x_i, x_j), j in [i, n), evaluated into buf one evaluator block
// at a time (buf[b] = k_P(x_i, x_{b0 + b}); the first block starts at the diagonal, b0 = i)
template <class F>
void upper_row(const KernelSpec& K, const SoAView& P, int64_t i, double* buf, F&& f) {
    for (int64_t b0 = i; b0 < K.n; b0 += kSoABlock) {
        const int64_t b1 = std::min(K.n, b0 + kSoABlock);
        kEval(K, i, P, b0, b1, buf);
        f(b0, b1 - b0);
    }
}
}  // namespace

int64_t soa_matvec_slots(int64_t n) {
    constexpr int64_t kSlots = 32;
    return 8.0 * static_cast<double>(kSlots) * static_cast<double>(n) <= kSymMatvecBytes ? kSlots
                                                                                        : 0;
}

void soa_matvec_sym(const KernelSpec& K, const double* w, double* out, int n_threads) {
    const AllPoints all(K);
    const SoAView& P = all.view();
    const int64_t n = K.n;
    if (n <= 0) return;
    constexpr int64_t kRows = 8;
    const int64_t nch = (n + kRows - 1) / kRows;
    const int64_t S = std::min(std::max<int64_t>(soa_matvec_slots(n), 1), nch);
    std::vector<double> acc(static_cast<size_t>(S * n), 0.0);
    Team team(n_threads);
    const double half = 0.5 * static_cast<double>(n) * static_cast<double>(n + 1);
    team.for_chunks_on(team.members_for(half * entry_ns(K.d), S, 1), S, [&](int64_t s) {
        alignas(64) double buf[kSoABlock];
        double* a = acc.data() + s * n;
        for (int64_t c = s; c < nch; c += S) {
            // a slot holds 1/S of all rows (seconds of work at n = 2^17): Ctrl-C is polled
            // every 8 rows (8 n evaluations), not once per slot
            poll_cancel();
            for (int64_t i = c * kRows; i < std::min(n, (c + 1) * kRows); ++i) {
                const double wi = w[i];
                double row = 0.0;
                upper_row(K, P, i, buf, [&](int64_t b0, int64_t len) {
                    for (int64_t b = 0; b < len; ++b) row += buf[b] * w[b0 + b];
                    double* aj = a + b0;
                    for (int64_t b = b0 == i ? 1 : 0; b < len; ++b) aj[b] += buf[b] * wi;
                });
                a[i] += row;
            }
        }
    });
    const int64_t nb = soa_blocks(n);
    team.for_chunks_on(team.members_for(static_cast<double>(S * n), nb, 1), nb, [&](int64_t c) {
        const int64_t j0 = c * kSoABlock, j1 = std::min(n, j0 + kSoABlock);
        for (int64_t j = j0; j < j1; ++j) out[j] = acc[j];
        for (int64_t s = 1; s < S; ++s) {
            const double* a = acc.data() + s * n;
            for (int64_t j = j0; j < j1; ++j) out[j] += a[j];
        }
    });
}

double soa_quad(const KernelSpec& K, const double* w, int n_threads) {
    const AllPoints all(K);
    const SoAView& P = all.view();
    const int64_t n = K.n;
    if (n <= 0) return 0.0;
    constexpr int64_t kRows = 8;
    const int64_t nch = (n + kRows - 1) / kRows;
    std::vector<double> part(static_cast<size_t>(nch), 0.0);
    Team team(n_threads);
    const double half = 0.5 * static_cast<double>(n) * static_cast<double>(n + 1);
    team.for_chunks_on(team.members_for(half * entry_ns(K.d), nch, 1), nch, [&](int64_t c) {
        alignas(64) double buf[kSoABlock];
        double q = 0.0;
        for (int64_t i = c * kRows; i < std::min(n, (c + 1) * kRows); ++i) {
            if (w[i] == 0.0) continue;
            // k_ii first in the row's first block, then the entries j > i
            double diag = 0.0, off = 0.0;
            upper_row(K, P, i, buf, [&](int64_t b0, int64_t len) {
                int64_t b = 0;
                if (b0 == i) diag = buf[b++] * w[i];
                for (; b < len; ++b) off += buf[b] * w[b0 + b];
            });
            q += w[i] * (diag + 2.0 * off);
        }
        part[c] = q;
    });
    double total = 0.0;
    for (int64_t c = 0; c < nch; ++c) total += part[c];
    return total;
}

void gram(const KernelSpec& K, const int64_t* rows, int64_t nr, const int64_t* cols, int64_t nc,
          double* out, int n_threads) {
    SoAPoints sub;
    std::optional<AllPoints> all;
    SoAView P;
    if (cols != nullptr) {
        sub.gather(K, cols, nc);
        P = sub.view();
    } else {
        all.emplace(K);
        P = all->view();
        nc = K.n;
    }
    const int64_t nb = soa_blocks(nc);
    Team team(n_threads);
    // chunks are (row, block) pairs, so the one-row calls of RPCholesky use every thread
    team.for_chunks_on(
        team.members_for(static_cast<double>(nr) * static_cast<double>(nc) * entry_ns(K.d),
                         nr * nb, 1),
        nr * nb, [&](int64_t c) {
            const int64_t a = c / nb, lo = (c - a * nb) * kSoABlock;
            kEval(K, rows[a], P, lo, std::min(nc, lo + kSoABlock), out + a * nc + lo);
        });
}

void kernel_column(const KernelSpec& K, int64_t j, double* out, int n_threads) {
    gram(K, &j, 1, nullptr, 0, out, n_threads);
}

void kernel_row_means(const KernelSpec& K, const int64_t* rows, int64_t nr, double* out,
                      int n_threads) {
    const AllPoints all(K);
    const SoAView& P = all.view();
    const int64_t n = K.n;
    const double inv = 1.0 / static_cast<double>(n);
    Team team(n_threads);
    team.for_chunks_on(
        team.members_for(static_cast<double>(nr) * static_cast<double>(n) * entry_ns(K.d), nr, 1),
        nr, [&](int64_t a) { out[a] = soa_sum(K, rows[a], P, 0, n) * inv; });
}

void diag(const KernelSpec& K, double* out, int n_threads) {
    constexpr int64_t kPoints = 4096;
    Team team(n_threads);
    const int64_t nch = (K.n + kPoints - 1) / kPoints;
    // one entry at a time: ~10x the cost of an entry in a block
    team.for_chunks_on(
        team.members_for(10.0 * static_cast<double>(K.n) * entry_ns(K.d), nch, 1),
        nch, [&](int64_t c) {
            for (int64_t i = c * kPoints; i < std::min(K.n, (c + 1) * kPoints); ++i)
                out[i] = soa_entry(K, i, i);
        });
}

}  // namespace sc

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
// the compiler's own vectorisation at 256 bits (faster than 512 for the square-root and division
// loops); the written vectors of the IMQ's reciprocal square root and of the tiles use 512
#if defined(__clang__)
#define SC_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl,avx512dq,avx512bw")))
#else
#define SC_TARGET \
    __attribute__((target("avx2,fma,avx512f,avx512vl,avx512dq,avx512bw,prefer-vector-width=256")))
#endif
#define SC_RSQRT14 1
#define SC_ROW_LANES 8
#include "soa_kernel_impl.inc"
#undef SC_ROW_LANES
#undef SC_RSQRT14
#undef SC_TARGET
}  // namespace isa_avx512
namespace isa_avx2 {
#define SC_TARGET __attribute__((target("avx2,fma")))
#define SC_ROW_LANES 4
#include "soa_kernel_impl.inc"
#undef SC_ROW_LANES
#undef SC_TARGET
}  // namespace isa_avx2
#endif
namespace isa_base {
#define SC_TARGET
#define SC_ROW_LANES 4
#include "soa_kernel_impl.inc"
#undef SC_ROW_LANES
#undef SC_TARGET
}  // namespace isa_base

namespace {

using EvalFn = void (*)(const KernelSpec&, int64_t, const SoAView&, int64_t, int64_t, double*);
using RowsFn = void (*)(const KernelSpec&, const int64_t*, const SoAView&, int64_t, int64_t,
                        double*, int64_t);
using PackedFn = void (*)(const KernelSpec&, const int64_t*, const PackedView&, int64_t,
                          double*, int64_t);

enum class Isa { base, avx2, avx512 };

Isa pick() {
#ifdef SC_MULTI_ISA
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return Isa::avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return Isa::avx2;
    }
#endif
    return Isa::base;
}

const Isa kIsa = pick();

#ifdef SC_MULTI_ISA
const EvalFn kEval = kIsa == Isa::avx512 ? isa_avx512::eval_block
                     : kIsa == Isa::avx2 ? isa_avx2::eval_block
                                         : isa_base::eval_block;
const RowsFn kEvalRows2 = kIsa == Isa::avx512 ? isa_avx512::eval_rows2
                          : kIsa == Isa::avx2 ? isa_avx2::eval_rows2
                                              : isa_base::eval_rows2;
const PackedFn kEvalPacked = kIsa == Isa::avx512 ? isa_avx512::eval_rows_packed
                             : kIsa == Isa::avx2 ? isa_avx2::eval_rows_packed
                                                 : isa_base::eval_rows_packed;
#else
const EvalFn kEval = isa_base::eval_block;
const PackedFn kEvalPacked = isa_base::eval_rows_packed;
const RowsFn kEvalRows2 = isa_base::eval_rows2;
#endif

// Chunks of 8 rows per work item of the tiled products: 64 rows share each block of columns.
constexpr int64_t kTile = 8;

// acc[j % 8] += x[j] w[j] for j in [a, e): a row's dot product with w in eight partial sums, a
// fixed association whatever blocks the row's entries arrive in (so every path sums a row
// alike, and n_threads changes nothing), and one that vector units run without waiting on the
// previous add (a single running sum costs an add's latency per entry).
inline void dot_lanes(const double* x, const double* w, int64_t a, int64_t e, double* acc) {
    int64_t j = a;
    for (; j < e && (j & 7) != 0; ++j) acc[j & 7] += x[j] * w[j];
    for (; j + 8 <= e; j += 8)
        for (int64_t l = 0; l < 8; ++l) acc[l] += x[j + l] * w[j + l];
    for (; j < e; ++j) acc[j & 7] += x[j] * w[j];
}

inline double lanes_total(const double* acc) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// A tile's rows, kSoARows at a time, against packed slots [b0, b0 + B.len):
// f(g, grp, real, from, bg) per group, bg[r * kSoABlock + b - from] = k_P(x_{grp[r]}, slot b0 + b)
// for b in [from, B.len), `real` of the group's rows being the tile's (a last short group
// repeats its last row: each entry is evaluated on its own, so the repeats are only dropped).
// With `upper` (rows ascending, the upper triangle) a group's entries start at its first row's
// diagonal and the groups starting past the block are skipped; else from = 0.
template <class F>
void tile_groups(const KernelSpec& K, const PackedView& B, int64_t b0, const int64_t* rows,
                 int64_t nr, bool upper, double* buf, F&& f) {
    for (int64_t g = 0; g * kSoARows < nr; ++g) {
        const int64_t r0 = g * kSoARows, real = std::min(kSoARows, nr - r0);
        if (upper && rows[r0] >= b0 + B.len) break;
        const int64_t from = upper ? std::max<int64_t>(0, rows[r0] - b0) : 0;
        int64_t grp[kSoARows];
        for (int64_t r = 0; r < kSoARows; ++r) grp[r] = rows[r0 + std::min(r, real - 1)];
        kEvalPacked(K, grp, B, from, buf, kSoABlock);
        f(g, static_cast<const int64_t*>(grp), real, from, static_cast<const double*>(buf));
    }
}

// A thread's storage for packed blocks: kept from call to call while a block takes at most
// kKeepPackedBytes (d <= 256 with scores), a fresh one per use beyond (a kept block lives as
// long as its thread: at d = 10^4 it would hold 40 MB on every member of every team).
constexpr double kKeepPackedBytes = 1 << 20;
class PackedScratch {
public:
    PackedPoints& for_view(const SoAView& P) {
        const double bytes = static_cast<double>(kSoABlock) * static_cast<double>(P.d) *
                             (P.T != nullptr ? 2.0 : 1.0) * sizeof(double);
        if (bytes > kKeepPackedBytes) return own_;
        thread_local PackedPoints kept;
        return kept;
    }

private:
    PackedPoints own_;
};

// The upper triangle of ascending rows[0..nr) against the points of P, one packed block of
// columns after another from the first row's diagonal on: f(l, i, j0, b1, e) for each row
// l (the point i = rows[l]) and block whose columns [j0, b1) lie on or right of its diagonal
// (j0 = i in the row's first block), e[j] = k_P(x_i, x_j) for j in [j0, b1); blocks in order.
template <class F>
void upper_tiles(const KernelSpec& K, const SoAView& P, PackedPoints& block, const int64_t* rows,
                 int64_t nr, double* buf, F&& f) {
    for (int64_t b0 = nr > 0 ? rows[0] : K.n; b0 < K.n; b0 += kSoABlock) {
        const int64_t b1 = std::min(K.n, b0 + kSoABlock);
        const PackedView pk = block.pack(P, b0, b1);
        tile_groups(K, pk, b0, rows, nr, true, buf,
                    [&](int64_t g, const int64_t* grp, int64_t real, int64_t from,
                        const double* bg) {
            for (int64_t r = 0; r < real; ++r) {
                const int64_t i = grp[r];
                if (i >= b1) continue;  // its diagonal is in a later block
                f(g * kSoARows + r, i, std::max(b0 + from, i), b1,
                  bg + r * kSoABlock - from - b0);
            }
        });
    }
}

// Rows per tile of the products: 64 rows share each packed block of columns.
constexpr int64_t kTileRows = kTile * 8;

}  // namespace

void PackedPoints::shape(int64_t d, bool stein, bool centred, int64_t capacity) {
    d_ = d;
    stein_ = stein;
    centred_ = centred;
    cs_ = stein ? 2 * kPackLanes : kPackLanes;
    gs_ = d * cs_;
    const int64_t groups = (capacity + kPackLanes - 1) / kPackLanes;
    buf_.assign(static_cast<size_t>(groups * gs_ + 8), 0.0);
    const auto addr = reinterpret_cast<uintptr_t>(buf_.data());
    off_ = ((64 - addr % 64) % 64) / sizeof(double);
    if (centred) mean_.assign(static_cast<size_t>(groups * kPackLanes), 0.0);
}

PackedView PackedPoints::pack(const SoAView& P, int64_t a, int64_t e) {
    const int64_t len = e - a, groups = (len + kPackLanes - 1) / kPackLanes;
    // a block's storage is kept from call to call (a thread's tiles reuse it)
    if (d_ != P.d || stein_ != (P.T != nullptr) || centred_ != (P.mean != nullptr) ||
        static_cast<int64_t>(buf_.size()) < groups * P.d * (P.T ? 2 : 1) * kPackLanes + 8)
        shape(P.d, P.T != nullptr, P.mean != nullptr, std::max(len, kSoABlock));
    for (int64_t g = 0; g < groups; ++g) {
        const int64_t b0 = a + g * kPackLanes, lanes = std::min(kPackLanes, e - b0);
        double* dst = base() + g * gs_;
        for (int64_t c = 0; c < d_; ++c, dst += cs_) {
            const double* U = P.U + c * P.cap + b0;
            for (int64_t l = 0; l < kPackLanes; ++l) dst[l] = l < lanes ? U[l] : 0.0;
            if (stein_) {
                const double* T = P.T + c * P.cap + b0;
                for (int64_t l = 0; l < kPackLanes; ++l)
                    dst[kPackLanes + l] = l < lanes ? T[l] : 0.0;
            }
        }
    }
    if (centred_)
        for (int64_t b = 0; b < len; ++b) mean_[static_cast<size_t>(b)] = P.mean[a + b];
    return view(0, len);
}

void soa_eval_rows_packed(const KernelSpec& K, const int64_t* rows, const PackedView& B,
                          int64_t from, double* out, int64_t ld) {
    kEvalPacked(K, rows, B, from, out, ld);
}

void soa_eval_rows2(const KernelSpec& K, const int64_t* rows, const SoAView& P, int64_t a,
                    int64_t e, double* out, int64_t ld) {
    kEvalRows2(K, rows, P, a, e, out, ld);
}

void soa_eval(const KernelSpec& K, int64_t i, const SoAView& P, int64_t a, int64_t e,
              double* out) {
    kEval(K, i, P, a, e, out);
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
    const int64_t nt = (n + kTileRows - 1) / kTileRows;
    Team team(n_threads);
    team.for_chunks_on(
        team.members_for(static_cast<double>(n) * static_cast<double>(n) * entry_ns(K.d), nt, 1),
        nt,
        [&](int64_t t) {
            alignas(64) double buf[kSoARows * kSoABlock];
            PackedScratch scratch;
            PackedPoints& block = scratch.for_view(P);
            const int64_t i0 = t * kTileRows, nr = std::min(n, i0 + kTileRows) - i0;
            int64_t rows[kTileRows];
            double s[kTileRows + kSoARows] = {};  // room for a last short group's repeats
            for (int64_t r = 0; r < nr; ++r) rows[r] = i0 + r;
            // each row's sum over the blocks in order, as a row at a time sums it
            for (int64_t a = 0; a < n; a += kSoABlock) {
                const int64_t e = std::min(n, a + kSoABlock);
                const PackedView pk = block.pack(P, a, e);
                tile_groups(K, pk, a, rows, nr, false, buf,
                            [&](int64_t g, const int64_t*, int64_t, int64_t, const double* bg) {
                    rows_dot(bg, w + a, e - a, s + g * kSoARows);
                });
            }
            for (int64_t r = 0; r < nr; ++r) out[i0 + r] = s[r];
        });
}

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
        alignas(64) double buf[kSoARows * kSoABlock];
        PackedScratch scratch;
        PackedPoints& block = scratch.for_view(P);
        double* a = acc.data() + s * n;
        // the slot's chunks s, s + S, ... taken kTile at a time: their rows (ascending) against
        // one packed block after another from the first row on. Each a[j] still takes its rows'
        // terms in row order, and a row's own sum goes to a[i] after every earlier row's term
        // k_ji w_j (later chunks' rows are all past i): a chunk at a time gives the same sums.
        for (int64_t c0 = s; c0 < nch; c0 += kTile * S) {
            // a slot holds 1/S of all rows (seconds of work at n = 2^17): Ctrl-C is polled
            // every kTile chunks, not once per slot
            poll_cancel();
            int64_t rows[kTileRows];
            double row[kTileRows] = {};
            int64_t nr = 0;
            for (int64_t c = c0; c < nch && c < c0 + kTile * S; c += S)
                for (int64_t i = c * kRows; i < std::min(n, (c + 1) * kRows); ++i) rows[nr++] = i;
            upper_tiles(K, P, block, rows, nr, buf,
                        [&](int64_t l, int64_t i, int64_t j0, int64_t b1, const double* e) {
                double& ri = row[l];
                for (int64_t j = j0; j < b1; ++j) ri += e[j] * w[j];
                const double wi = w[i];
                for (int64_t j = j0 == i ? j0 + 1 : j0; j < b1; ++j) a[j] += e[j] * wi;
            });
            for (int64_t r = 0; r < nr; ++r) a[rows[r]] += row[r];
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
    // a work item is kTile chunks: their rows are evaluated
    // kSoARows at a time against one block of columns after another, so a block's coordinates
    // stay in cache for all of the item's rows (a row at a time streams all n points' coordinates
    // once per row: at d = 100 that is memory-bound)
    const int64_t nitems = (nch + kTile - 1) / kTile;
    Team team(n_threads);
    const double half = 0.5 * static_cast<double>(n) * static_cast<double>(n + 1);
    team.for_chunks_on(team.members_for(half * entry_ns(K.d), nitems, 1), nitems, [&](int64_t it) {
        alignas(64) double buf[kSoARows * kSoABlock];
        PackedScratch scratch;
        PackedPoints& block = scratch.for_view(P);
        const int64_t c0 = it * kTile, c1 = std::min(nch, c0 + kTile);
        const int64_t i0 = c0 * kRows, i1 = std::min(n, c1 * kRows);
        // the item's rows of nonzero weight, in order, and their sums k_ii w_i, sum_{j>i} k_ij w_j
        int64_t live[kTile * kRows];
        double diag[kTile * kRows], off[kTile * kRows][8];
        int64_t nl = 0;
        for (int64_t i = i0; i < i1; ++i)
            if (w[i] != 0.0) live[nl++] = i;
        for (int64_t l = 0; l < nl; ++l) {
            diag[l] = 0.0;
            for (int64_t k = 0; k < 8; ++k) off[l][k] = 0.0;
        }
        upper_tiles(K, P, block, live, nl, buf,
                    [&](int64_t l, int64_t i, int64_t j, int64_t b1, const double* e) {
            if (j == i) diag[l] = e[j++] * w[i];
            dot_lanes(e, w, j, b1, off[l]);
        });
        // each chunk's rows added in order, as a chunk at a time adds them
        int64_t l = 0;
        for (int64_t c = c0; c < c1; ++c) {
            double q = 0.0;
            for (; l < nl && live[l] < (c + 1) * kRows; ++l)
                q += w[live[l]] * (diag[l] + 2.0 * lanes_total(off[l]));
            part[c] = q;
        }
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
    const double work = static_cast<double>(nr) * static_cast<double>(nc) * entry_ns(K.d);
    if (nr < kSoARows) {
        // (row, block) chunks, so the one-row calls of RPCholesky use every thread
        team.for_chunks_on(team.members_for(work, nr * nb, 1), nr * nb, [&](int64_t c) {
            const int64_t a = c / nb, lo = (c % nb) * kSoABlock, hi = std::min(nc, lo + kSoABlock);
            kEval(K, rows[a], P, lo, hi, out + a * nc + lo);
        });
        return;
    }
    // (tile of rows, block) chunks: the block packed once for the tile's rows
    const int64_t nt = (nr + kTileRows - 1) / kTileRows;
    team.for_chunks_on(team.members_for(work, nt * nb, 1), nt * nb, [&](int64_t c) {
        alignas(64) double buf[kSoARows * kSoABlock];
        PackedScratch scratch;
        PackedPoints& block = scratch.for_view(P);
        const int64_t t0 = (c / nb) * kTileRows, lo = (c % nb) * kSoABlock;
        const int64_t hi = std::min(nc, lo + kSoABlock);
        const PackedView pk = block.pack(P, lo, hi);
        tile_groups(K, pk, lo, rows + t0, std::min(nr - t0, kTileRows), false, buf,
                    [&](int64_t g, const int64_t*, int64_t real, int64_t, const double* bg) {
            for (int64_t r = 0; r < real; ++r) {
                double* o = out + (t0 + g * kSoARows + r) * nc + lo;
                for (int64_t b = 0; b < hi - lo; ++b) o[b] = bg[r * kSoABlock + b];
            }
        });
    });
}

void kernel_column(const KernelSpec& K, int64_t j, double* out, int n_threads) {
    gram(K, &j, 1, nullptr, 0, out, n_threads);
}

void soa_row_sums(const KernelSpec& K, const int64_t* rows, int64_t nr, const SoAView& P,
                  int64_t len, double* out) {
    alignas(64) double buf[kSoARows * kSoABlock];
    PackedScratch scratch;
    PackedPoints& block = scratch.for_view(P);
    for (int64_t t0 = 0; t0 < nr; t0 += kTileRows) {
        const int64_t m = std::min(nr - t0, kTileRows);
        double s[kTileRows + kSoARows] = {};  // room for a last short group's repeats
        // each row's entries one after another, block by block
        for (int64_t b0 = 0; b0 < len; b0 += kSoABlock) {
            const int64_t b1 = std::min(len, b0 + kSoABlock);
            const PackedView pk = block.pack(P, b0, b1);
            tile_groups(K, pk, b0, rows + t0, m, false, buf,
                        [&](int64_t g, const int64_t*, int64_t, int64_t, const double* bg) {
                rows_dot(bg, nullptr, b1 - b0, s + g * kSoARows);
            });
        }
        for (int64_t r = 0; r < m; ++r) out[t0 + r] = s[r];
    }
}

void kernel_row_means(const KernelSpec& K, const int64_t* rows, int64_t nr, double* out,
                      int n_threads) {
    const AllPoints all(K);
    const SoAView& P = all.view();
    const int64_t n = K.n;
    const double inv = 1.0 / static_cast<double>(n);
    const int64_t nt = (nr + kTileRows - 1) / kTileRows;
    Team team(n_threads);
    team.for_chunks_on(
        team.members_for(static_cast<double>(nr) * static_cast<double>(n) * entry_ns(K.d), nt, 1),
        nt, [&](int64_t t) {
            const int64_t t0 = t * kTileRows, m = std::min(nr - t0, kTileRows);
            soa_row_sums(K, rows + t0, m, P, n, out + t0);
            for (int64_t r = 0; r < m; ++r) out[t0 + r] *= inv;
        });
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

#include "dksd.hpp"

#include "cancel.hpp"
#include "isa.hpp"
#include "parallel.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

// The blocked pass is also built for AVX-512 and AVX2+FMA (isa.hpp) and the widest one the CPU
// supports is picked at first use.
#ifdef SC_MULTI_ISA
#include <immintrin.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
// The 8-double vectors of dksd_impl.inc are passed between static inline functions only, so the
// ABI note for the AVX2 and baseline builds concerns no caller outside this file; and GCC reads
// _mm512_rsqrt14_pd's undefined pass-through operand as uninitialised.
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace sc {

namespace {

// Columns per block of the pass at most: the block's radial terms and (full F) its delta stay
// in L1/L2.
constexpr int64_t kBlock = 256;

// Rows per work item: fixed chunks, their sums added in chunk order (so the value does not
// depend on the number of threads); a full F's column block is read once per chunk.
constexpr int64_t kChunkRows = 16;

// The tiled copy the pass reads its columns from, and the distinct base kernels.
struct DKSDLayout {
    int64_t cap = 0;               // columns, n rounded up to a multiple of 8
    int64_t block = 0;             // columns per block, a multiple of 8, <= kBlock
    const double* U = nullptr;     // cap / 8 tiles of d x 8
    const double* V = nullptr;     // cap / 8 tiles of d x 8
    const double* F = nullptr;     // tiles of d x 8 (diagonal) or d*d x 8 (full, row l*d + r)
    int64_t nk = 0;                // distinct base kernels
    const int64_t* kid = nullptr;  // d: component r uses kernel kid[r]
    const int64_t* rep = nullptr;  // nk: a component of each kernel
};

}  // namespace

#ifdef SC_MULTI_ISA
namespace dksd_avx512 {
#define SC_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl,avx512dq,avx512bw")))
#define SC_RSQRT14 1
#include "dksd_impl.inc"
#undef SC_RSQRT14
#undef SC_TARGET
}  // namespace dksd_avx512
namespace dksd_avx2 {
#define SC_TARGET __attribute__((target("avx2,fma")))
#include "dksd_impl.inc"
#undef SC_TARGET
}  // namespace dksd_avx2
#endif
namespace dksd_base {
#define SC_TARGET
#include "dksd_impl.inc"
#undef SC_TARGET
}  // namespace dksd_base

namespace {

using RowsFn = double (*)(const DKSDSpec&, const DKSDLayout&, int64_t, int64_t, double, double*,
                          double*, double*);

RowsFn pick() {
#ifdef SC_MULTI_ISA
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return dksd_avx512::dksd_rows;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return dksd_avx2::dksd_rows;
    }
#endif
    return dksd_base::dksd_rows;
}

const RowsFn kRowsFn = pick();

// n x rows row-major -> 8-column tiles: column j's coordinate c at (j - j % 8) rows + 8 c + j % 8,
// zero past n (a tile's coordinates contiguous: the pass reads each tile front to back)
void tile_into(const double* X, int64_t n, int64_t rows, int64_t cap, double* out) {
    for (int64_t j0 = 0; j0 < cap; j0 += 8) {
        double* o = out + j0 * rows;
        for (int64_t c = 0; c < rows; ++c)
            for (int64_t t = 0; t < 8; ++t)
                o[c * 8 + t] = j0 + t < n ? X[(j0 + t) * rows + c] : 0.0;
    }
}

}  // namespace

double dksd_pass(const DKSDSpec& S, double* Gv, double* Gf, int n_threads) {
    const int64_t n = S.n, d = S.d;
    if (n < 2 || d < 1) throw std::invalid_argument("dksd_pass needs n >= 2 and d >= 1");
    const double c = 1.0 / (static_cast<double>(n) * static_cast<double>(n - 1));
    const bool grad = Gv != nullptr && Gf != nullptr;
    // components sharing a base kernel evaluate it once per pair
    std::vector<int64_t> kid(d), rep;
    for (int64_t r = 0; r < d; ++r) {
        kid[r] = -1;
        for (int64_t k = 0; k < static_cast<int64_t>(rep.size()); ++k) {
            const int64_t s = rep[k];
            if (S.base[s] == S.base[r] && S.sigma[s] == S.sigma[r] && S.beta[s] == S.beta[r]) {
                kid[r] = k;
                break;
            }
        }
        if (kid[r] < 0) {
            kid[r] = static_cast<int64_t>(rep.size());
            rep.push_back(r);
        }
    }
    const int64_t nk = static_cast<int64_t>(rep.size());
    // the tiled copy (one row of 8-column tiles per coordinate would put each coordinate of
    // a tile on its own page: at d = 50 the 150 streams of U, V and F missed the TLB)
    const int64_t cap = (n + 7) / 8 * 8;
    const int64_t frows = S.full ? d * d : d;
    std::vector<double> soa(static_cast<size_t>((2 * d + frows) * cap));
    tile_into(S.U, n, d, cap, soa.data());
    tile_into(S.V, n, d, cap, soa.data() + d * cap);
    tile_into(S.F, n, frows, cap, soa.data() + 2 * d * cap);
    DKSDLayout Lt;
    Lt.cap = cap;
    // a block's columns stay in cache while the chunk's 16 rows take it: a full F's block
    // (d^2 x block doubles) within 256 KiB, a diagonal one's U, V, F (3 d x block) within
    // ~24 KiB of L1 (measured at n = 4000, one thread: d = 10 0.13 -> 0.10 s from 256 to 96
    // columns, d = 50 0.69 -> 0.55-0.61 s at 32)
    Lt.block = S.full ? std::min<int64_t>(kBlock, std::max<int64_t>(8, 32768 / (d * d) / 8 * 8))
                      : std::min<int64_t>(kBlock, std::max<int64_t>(32, 1024 / d / 8 * 8));
    Lt.U = soa.data();
    Lt.V = soa.data() + d * cap;
    Lt.F = soa.data() + 2 * d * cap;
    Lt.nk = nk;
    Lt.kid = kid.data();
    Lt.rep = rep.data();
    const size_t work_len = static_cast<size_t>((3 * nk + 5 + (S.full ? d : 0)) * kBlock + 2 * d);
    const int64_t nch = (n + kChunkRows - 1) / kChunkRows;
    std::vector<double> partial(static_cast<size_t>(nch), 0.0);
    Team team(n_threads);
    // a pair: nk radial evaluations and ~d (full: d^2) multiply-adds per component, twice with
    // the gradient, at about 8 per ns
    const double pair_ns = (2.0 * static_cast<double>(nk) +
                            static_cast<double>(S.full ? d * d : d) * (grad ? 1.0 : 0.5));
    team.for_chunks_on(
        team.members_for(static_cast<double>(n) * static_cast<double>(n) * pair_ns, nch, 1),
        nch,
        [&](int64_t ch) {
            poll_cancel();
            std::vector<double> work(work_len);
            partial[static_cast<size_t>(ch)] =
                kRowsFn(S, Lt, ch * kChunkRows, std::min(n, (ch + 1) * kChunkRows), c,
                        work.data(),
                        grad ? Gv : nullptr, grad ? Gf : nullptr);
        });
    double total = 0.0;
    for (double v : partial) total += v;
    return total;
}

}  // namespace sc

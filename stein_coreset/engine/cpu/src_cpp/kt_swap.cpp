#include "kt_swap.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "parallel.hpp"
#include "progress.hpp"
#include "soa_kernel.hpp"

namespace sc {

void coreset_sums(const KernelSpec& K, const int64_t* C, int64_t L, int64_t m, double* out,
                  int n_threads) {
    Team team(n_threads);
    // L loops in a row, one per coreset: the workers stay awake from one to the next, so the
    // wake-up is paid once, not L times
    constexpr int64_t kRows = 16;  // rows per chunk, evaluated as one tile
    const int64_t nch = (m + kRows - 1) / kRows;
    const int M = team.members_for(static_cast<double>(m * m) * entry_ns(K.d), nch, L);
    std::vector<double> rows(static_cast<size_t>(m));
    SoAPoints P;
    for (int64_t l = 0; l < L; ++l) {
        const int64_t* I = C + l * m;
        P.gather(K, I, m);
        const SoAView v = P.view();
        team.for_chunks_on(M, nch, [&](int64_t c) {
            const int64_t a = c * kRows;
            soa_row_sums(K, I + a, std::min(kRows, m - a), v, m, rows.data() + a);
        });
        double s = 0.0;
        for (int64_t a = 0; a < m; ++a) s += rows[static_cast<size_t>(a)];
        out[l] = s;
    }
}

namespace {

// Points per chunk of a swap step (fixed; the result does not depend on it either: the first
// argmin is folded block by block in index order).
constexpr int64_t kChunk = 4 * kSoABlock;

struct First {
    double v;
    int64_t i;  // -1: none
};

// the fold of Alg. D.3's argmin in index order: the first candidate, then strictly smaller ones
inline void fold(First& acc, const First& x) {
    if (x.i >= 0 && (acc.i < 0 || x.v < acc.v)) acc = x;
}

}  // namespace

int64_t kt_swap_refine(const KernelSpec& K, int64_t* I, int64_t m, int passes, int n_threads,
                       bool sorted_sweeps) {
    const int64_t n = K.n, nch = (n + kChunk - 1) / kChunk;
    if (m <= 0 || passes <= 0) return 0;
    if (sorted_sweeps) std::sort(I, I + m);  // g does not depend on the order
    Team team(n_threads);
    std::vector<double> g(static_cast<size_t>(n)), dg(static_cast<size_t>(n)),
        col(static_cast<size_t>(n));
    diag(K, dg.data(), n_threads);
    {
        SoAPoints C;
        C.gather(K, I, m);
        const SoAView v = C.view();
        constexpr int64_t kRows = 64;
        const int64_t nr = (n + kRows - 1) / kRows;
        team.for_chunks_on(
            team.members_for(static_cast<double>(n * m) * entry_ns(K.d), nr, 1),
            nr, [&](int64_t c) {
                int64_t rows[kRows];
                const int64_t i0 = c * kRows, nr_c = std::min(n - i0, kRows);
                for (int64_t r = 0; r < nr_c; ++r) rows[r] = i0 + r;
                soa_row_sums(K, rows, nr_c, v, m, g.data() + i0);
            });
    }
    const AllPoints all(K);
    const SoAView& P = all.view();
    std::vector<Padded<First>> part(static_cast<size_t>(nch));
    // What the previous step left to do on g, applied by the next step's chunks (one barrier per
    // swap): -2 nothing, -1 undo (g += col: the point stayed), else g += k(x_best, .)
    int64_t pending = -2;
    int64_t changed = 0, changed_pass = 0;
    // step s = swap of position a = s mod m in pass s / m:
    //   g <- g - k(x_cur, .), Delta = 2 g + diag, first argmin (per chunk, folded in order)
    team.steps(
        team.members_for(static_cast<double>(2 * n) * entry_ns(K.d), nch,
                         static_cast<int64_t>(passes) * m),
        static_cast<int64_t>(passes) * m, [nch](int64_t) { return nch; },
        [&](int64_t s, int64_t c, int) {
            const int64_t cur = I[s % m];
            First acc{std::numeric_limits<double>::infinity(), -1};
            alignas(64) double buf[kSoABlock];
            for (int64_t lo = c * kChunk; lo < std::min(n, (c + 1) * kChunk); lo += kSoABlock) {
                const int64_t hi = std::min(n, lo + kSoABlock);
                double* gb = g.data() + lo;
                double* cb = col.data() + lo;
                if (pending >= 0) {
                    soa_eval(K, pending, P, lo, hi, buf);
                    for (int64_t i = 0; i < hi - lo; ++i) gb[i] += buf[i];
                } else if (pending == -1) {
                    for (int64_t i = 0; i < hi - lo; ++i) gb[i] += cb[i];
                }
                soa_eval(K, cur, P, lo, hi, cb);
                First blk{std::numeric_limits<double>::infinity(), -1};
                for (int64_t i = 0; i < hi - lo; ++i) {
                    const double gi = gb[i] - cb[i];
                    gb[i] = gi;
                    const double delta = 2.0 * gi + dg[static_cast<size_t>(lo + i)];
                    if (blk.i < 0 || delta < blk.v) blk = First{delta, lo + i};
                }
                fold(acc, blk);
            }
            part[static_cast<size_t>(c)].v = acc;
        },
        [&](int64_t s) {
            const int64_t a = s % m, cur = I[a];
            First best{std::numeric_limits<double>::infinity(), -1};
            for (const auto& p : part) fold(best, p.v);
            // keep the current point unless another is strictly better
            const double cur_v = 2.0 * g[static_cast<size_t>(cur)] + dg[static_cast<size_t>(cur)];
            if (!(best.v < cur_v)) best.i = cur;
            if (best.i == cur) {
                pending = -1;
            } else {
                pending = best.i;
                I[a] = best.i;
                ++changed_pass;
            }
            progress_add(1);
            if (a + 1 < m) return true;
            changed += changed_pass;
            const bool again = changed_pass != 0;
            changed_pass = 0;
            // the next sweep's steps read I[s mod m] after this combine
            if (again && sorted_sweeps && s + 1 < static_cast<int64_t>(passes) * m)
                std::sort(I, I + m);
            return again;
        });
    return changed;
}

}  // namespace sc

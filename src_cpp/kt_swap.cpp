#include "kt_swap.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "cancel.hpp"
#include "parallel.hpp"
#include "soa_kernel.hpp"

namespace sc {

void coreset_sums(const KernelSpec& K, const int64_t* C, int64_t L, int64_t m, double* out,
                  int n_threads) {
    Team team(n_threads);
    std::vector<double> rows(static_cast<size_t>(m));
    SoAPoints P;
    for (int64_t l = 0; l < L; ++l) {
        poll_cancel();
        const int64_t* I = C + l * m;
        P.gather(K, I, m);
        const SoAView v = P.view();
        team.for_chunks(
            m, [&](int64_t a) { rows[static_cast<size_t>(a)] = soa_sum(K, I[a], v, 0, m); },
            m * m > kParallelWork);
        double s = 0.0;
        for (int64_t a = 0; a < m; ++a) s += rows[static_cast<size_t>(a)];
        out[l] = s;
    }
}

int64_t kt_swap_refine(const KernelSpec& K, int64_t* I, int64_t m, int passes, int n_threads) {
    const int64_t n = K.n, nb = soa_blocks(n);
    const bool par = n >= 2048;
    Team team(n_threads);
    std::vector<double> g(static_cast<size_t>(n)), dg(static_cast<size_t>(n)),
        col(static_cast<size_t>(n));
    diag(K, dg.data(), n_threads);
    {
        SoAPoints C;
        C.gather(K, I, m);
        const SoAView v = C.view();
        constexpr int64_t kRows = 64;
        team.for_chunks(
            (n + kRows - 1) / kRows,
            [&](int64_t c) {
                poll_cancel();
                for (int64_t i = c * kRows; i < std::min(n, (c + 1) * kRows); ++i)
                    g[static_cast<size_t>(i)] = soa_sum(K, i, v, 0, m);
            },
            n * m > kParallelWork);
    }
    const AllPoints all(K);
    const SoAView& P = all.view();
    std::vector<double> bv(static_cast<size_t>(nb));
    std::vector<int64_t> bi(static_cast<size_t>(nb));
    int64_t changed = 0;
    for (int p = 0; p < passes; ++p) {
        int64_t changed_pass = 0;
        for (int64_t a = 0; a < m; ++a) {
            poll_cancel();
            const int64_t cur = I[a];
            // g <- g - k(x_cur, .), Delta = 2 g + diag; first argmin per block, blocks combined in
            // order (so the first argmin overall, whatever the number of threads)
            team.for_chunks(
                nb,
                [&](int64_t blk) {
                    const int64_t lo = blk * kSoABlock, hi = std::min(n, lo + kSoABlock);
                    soa_eval(K, cur, P, lo, hi, col.data() + lo);
                    double v = std::numeric_limits<double>::infinity();
                    int64_t vi = -1;
                    for (int64_t i = lo; i < hi; ++i) {
                        const double gi = g[static_cast<size_t>(i)] - col[static_cast<size_t>(i)];
                        g[static_cast<size_t>(i)] = gi;
                        const double delta = 2.0 * gi + dg[static_cast<size_t>(i)];
                        if (vi < 0 || delta < v) {
                            v = delta;
                            vi = i;
                        }
                    }
                    bv[static_cast<size_t>(blk)] = v;
                    bi[static_cast<size_t>(blk)] = vi;
                },
                par);
            double best_v = std::numeric_limits<double>::infinity();
            int64_t best = -1;
            for (int64_t k = 0; k < nb; ++k) {
                if (bi[static_cast<size_t>(k)] >= 0 &&
                    (best < 0 || bv[static_cast<size_t>(k)] < best_v)) {
                    best_v = bv[static_cast<size_t>(k)];
                    best = bi[static_cast<size_t>(k)];
                }
            }
            // keep the current point unless another is strictly better
            const double cur_v = 2.0 * g[static_cast<size_t>(cur)] + dg[static_cast<size_t>(cur)];
            if (!(best_v < cur_v)) best = cur;
            if (best == cur) {
                for (int64_t i = 0; i < n; ++i) g[static_cast<size_t>(i)] += col[static_cast<size_t>(i)];
            } else {
                team.for_chunks(
                    nb,
                    [&](int64_t blk) {
                        const int64_t lo = blk * kSoABlock, hi = std::min(n, lo + kSoABlock);
                        alignas(64) double buf[kSoABlock];
                        soa_eval(K, best, P, lo, hi, buf);
                        for (int64_t i = lo; i < hi; ++i) g[static_cast<size_t>(i)] += buf[i - lo];
                    },
                    par);
                I[a] = best;
                ++changed_pass;
            }
        }
        changed += changed_pass;
        if (changed_pass == 0) break;
    }
    return changed;
}

}  // namespace sc

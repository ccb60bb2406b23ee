#include "kt_swap_ls.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cancel.hpp"
#include "parallel.hpp"
#include "soa_kernel.hpp"

namespace sc {

double kt_swap_ls(const KernelSpec& K, double* w, const int64_t* order, int64_t s, int fmt,
                  int n_threads) {
    const int64_t n = K.n, nb = soa_blocks(n);
    const AllPoints all(K);
    const SoAView& P = all.view();
    Team team(n_threads);
    // s steps, each a pass of n kernel entries (plus the line search)
    const int par = team.members_for(static_cast<double>(n) * entry_ns(K.d), nb, s);
    // col[j] = k_P(x_j, x_i) for all j, block by block
    auto column = [&](int64_t i, double* col) {
        team.for_chunks_on(
            par, nb,
            [&](int64_t blk) {
                const int64_t a = blk * kSoABlock;
                soa_eval(K, i, P, a, std::min(n, a + kSoABlock), col + a);
            });
    };
    std::vector<double> kdiag(static_cast<size_t>(n)), g(static_cast<size_t>(n)),
        g_old(static_cast<size_t>(n)), col_i(static_cast<size_t>(n)), col_k(static_cast<size_t>(n));
    std::vector<double> bD(static_cast<size_t>(nb)), bt(static_cast<size_t>(nb));
    std::vector<int64_t> bk(static_cast<size_t>(nb));
    diag(K, kdiag.data(), n_threads);
    // g = K w over the support, D = w^T g.
    std::vector<int64_t> supp;
    for (int64_t j = 0; j < n; ++j) {
        if (w[j] != 0.0) supp.push_back(j);
    }
    const int64_t ns = static_cast<int64_t>(supp.size());
    std::fill(g.begin(), g.end(), 0.0);
    for (int64_t a = 0; a < ns; ++a) {
        poll_cancel();
        const double wa = w[supp[a]];
        column(supp[a], col_i.data());
        for (int64_t j = 0; j < n; ++j) g[j] += wa * col_i[j];
    }
    double D = 0.0;
    for (int64_t a = 0; a < ns; ++a) D += w[supp[a]] * g[supp[a]];

    const bool splx = fmt == SPLX;
    for (int64_t step = 0; step < s; ++step) {
        poll_cancel();
        const int64_t i = order[step];
        const double wi = w[i];
        // Nothing to swap out, or removing i would leave (numerically) no mass behind.
        if (wi == 0.0 || std::fabs(1.0 - wi) < 1e-9) continue;
        const double D_old = D;
        // Remove i, renormalise: (g, D) <- Scale(Add(g, D, i, -w_i), 1 / (1 - w_i)); then the line
        // search over every candidate k. One pass over fixed blocks (the column of i, the update
        // of g and the block's best candidate); block bests combined in order: first argmin.
        const double sc = 1.0 / (1.0 - wi);
        D = (D - 2.0 * wi * g[i] + wi * wi * kdiag[i]) * sc * sc;
        const double Dn = D;
        team.for_chunks_on(
            par, nb,
            [&](int64_t blk) {
                const int64_t lo = blk * kSoABlock, hi = std::min(n, lo + kSoABlock);
                soa_eval(K, i, P, lo, hi, col_i.data() + lo);
                int64_t kl = -1;
                double Dl = std::numeric_limits<double>::infinity(), tl = 0.0;
                for (int64_t j = lo; j < hi; ++j) {
                    g_old[j] = g[j];
                    const double gj = (g[j] - wi * col_i[j]) * sc;
                    g[j] = gj;
                    const double den = Dn - 2.0 * gj + kdiag[j];
                    double t = den > 0.0 ? (Dn - gj) / den : 0.0;
                    if (splx) t = t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
                    const double Dj = (1.0 - t) * (1.0 - t) * Dn + 2.0 * t * (1.0 - t) * gj +
                                      t * t * kdiag[j];
                    if (Dj < Dl) {
                        Dl = Dj;
                        kl = j;
                        tl = t;
                    }
                }
                bD[static_cast<size_t>(blk)] = Dl;
                bk[static_cast<size_t>(blk)] = kl;
                bt[static_cast<size_t>(blk)] = tl;
            });
        int64_t kbest = -1;
        double Dbest = std::numeric_limits<double>::infinity(), tbest = 0.0;
        for (int64_t blk = 0; blk < nb; ++blk) {
            if (bD[static_cast<size_t>(blk)] < Dbest) {
                Dbest = bD[static_cast<size_t>(blk)];
                kbest = bk[static_cast<size_t>(blk)];
                tbest = bt[static_cast<size_t>(blk)];
            }
        }
        if (kbest < 0 || !(Dbest < D_old)) {
            // No strict improvement (the best is putting i back): keep the old state exactly.
            g.swap(g_old);
            D = D_old;
            continue;
        }
        for (int64_t j = 0; j < n; ++j) {
            if (w[j] != 0.0) w[j] *= sc;
        }
        w[i] = 0.0;
        const double t = tbest, keep = 1.0 - t;
        for (int64_t j = 0; j < n; ++j) {
            if (w[j] != 0.0) w[j] *= keep;
        }
        w[kbest] += t;
        team.for_chunks_on(
            par, nb,
            [&](int64_t blk) {
                const int64_t lo = blk * kSoABlock, hi = std::min(n, lo + kSoABlock);
                soa_eval(K, kbest, P, lo, hi, col_k.data() + lo);
                for (int64_t j = lo; j < hi; ++j) g[j] = keep * g[j] + t * col_k[j];
            });
        D = Dbest;
    }
    return D;
}

}  // namespace sc

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
    std::vector<double> kdiag(static_cast<size_t>(n)), g(static_cast<size_t>(n), 0.0),
        g2(static_cast<size_t>(n));
    std::vector<double> bD(static_cast<size_t>(nb)), bt(static_cast<size_t>(nb));
    std::vector<int64_t> bk(static_cast<size_t>(nb));
    diag(K, kdiag.data(), n_threads);
    // g = K w over the support, D = w^T g: each g_j summed over the support in order.
    std::vector<int64_t> supp;
    for (int64_t j = 0; j < n; ++j) {
        if (w[j] != 0.0) supp.push_back(j);
    }
    const int64_t ns = static_cast<int64_t>(supp.size());
    team.for_chunks_on(
        team.members_for(static_cast<double>(n * ns) * entry_ns(K.d), nb, 1), nb,
        [&](int64_t blk) {
            const int64_t lo = blk * kSoABlock, hi = std::min(n, lo + kSoABlock);
            double col[kSoABlock];
            for (int64_t a = 0; a < ns; ++a) {
                const double wa = w[supp[a]];
                soa_eval(K, supp[a], P, lo, hi, col);
                for (int64_t j = lo; j < hi; ++j) g[j] += wa * col[j - lo];
            }
        });
    double D = 0.0;
    for (int64_t a = 0; a < ns; ++a) D += w[supp[a]] * g[supp[a]];

    // One region of 2 s steps. Step 2 q visits i = order[q]: the removal of i (renormalised:
    // g2 = (g - w_i k_P(x_i, .)) / (1 - w_i)) and the line search of every candidate, in fixed
    // blocks, the blocks' bests combined in order (first argmin). Step 2 q + 1 takes a strictly
    // better swap: w <- (1 - t) w / (1 - w_i) with w_i = 0, plus t e_k, and g <- (1 - t) g2 +
    // t k_P(x_k, .), block by block; otherwise g and w stay as they were, exactly. Each entry's
    // arithmetic is the serial loop's, so the result does not depend on the team.
    const bool splx = fmt == SPLX;
    int64_t i = -1, kbest = -1;
    double wi = 0.0, sc = 1.0, Dn = 0.0, D_old = 0.0, tbest = 0.0;
    bool search = false, take = false;
    // before step 2 q: nothing to swap out, or removing i would leave (numerically) no mass
    auto visit = [&](int64_t q) {
        i = order[q];
        wi = w[i];
        search = !(wi == 0.0 || std::fabs(1.0 - wi) < 1e-9);
        if (search) {
            D_old = D;
            sc = 1.0 / (1.0 - wi);
            D = (D - 2.0 * wi * g[i] + wi * wi * kdiag[i]) * sc * sc;
            Dn = D;
        }
    };
    if (s > 0) visit(0);
    // s steps, each two passes of n kernel entries
    const int par = team.members_for(static_cast<double>(n) * entry_ns(K.d), nb, 2 * s);
    team.steps(
        par, 2 * s, [nb](int64_t) { return nb; },
        [&](int64_t step, int64_t blk, int) {
            const int64_t lo = blk * kSoABlock, hi = std::min(n, lo + kSoABlock);
            double col[kSoABlock];
            if ((step & 1) == 0) {
                if (!search) return;
                soa_eval(K, i, P, lo, hi, col);
                int64_t kl = -1;
                double Dl = std::numeric_limits<double>::infinity(), tl = 0.0;
                for (int64_t j = lo; j < hi; ++j) {
                    const double gj = (g[j] - wi * col[j - lo]) * sc;
                    g2[j] = gj;
                    double t;
                    const double Dj = portable::swap_ls_line(Dn, gj, kdiag[j], splx, &t);
                    if (Dj < Dl) {
                        Dl = Dj;
                        kl = j;
                        tl = t;
                    }
                }
                bD[static_cast<size_t>(blk)] = Dl;
                bk[static_cast<size_t>(blk)] = kl;
                bt[static_cast<size_t>(blk)] = tl;
                return;
            }
            if (!take) return;
            const double t = tbest, keep = 1.0 - t;
            soa_eval(K, kbest, P, lo, hi, col);
            for (int64_t j = lo; j < hi; ++j) {
                w[j] = portable::swap_ls_weight(w[j], j, i, sc, kbest, t);
                g[j] = keep * g2[j] + t * col[j - lo];
            }
        },
        [&](int64_t step) {
            if ((step & 1) == 0) {
                take = false;
                if (!search) return true;
                kbest = -1;
                double Dbest = std::numeric_limits<double>::infinity();
                tbest = 0.0;
                for (int64_t blk = 0; blk < nb; ++blk) {
                    if (bD[static_cast<size_t>(blk)] < Dbest) {
                        Dbest = bD[static_cast<size_t>(blk)];
                        kbest = bk[static_cast<size_t>(blk)];
                        tbest = bt[static_cast<size_t>(blk)];
                    }
                }
                // No strict improvement (the best is putting i back): keep the old state.
                take = kbest >= 0 && Dbest < D_old;
                D = take ? Dbest : D_old;
                return true;
            }
            const int64_t q = step / 2 + 1;
            if (q < s) visit(q);
            return true;
        });
    return D;
}

}  // namespace sc

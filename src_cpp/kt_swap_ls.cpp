#include "kt_swap_ls.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "soa_kernel.hpp"

namespace sc {

namespace {

// col[j] = k_P(x_j, x_i) for all j, by the vectorised evaluator over the SoA copy P.
void column(const KernelSpec& K, const SoAPoints& P, int64_t i, double* col) {
    const int64_t n = K.n, nb = (n + kSoABlock - 1) / kSoABlock;
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < nb; ++blk) {
        const int64_t a = blk * kSoABlock, e = std::min(n, a + kSoABlock);
        soa_eval(K, i, P, a, e, col + a);
    }
}

}  // namespace

double kt_swap_ls(const KernelSpec& K, double* w, const int64_t* order, int64_t s, int fmt) {
    const int64_t n = K.n;
    DynamicTeams teams;  // team size fixed once from the current load (see soa_kernel.hpp)
    SoAPoints P;
    P.load_all(K);
    std::vector<double> kdiag(static_cast<size_t>(n)), g(static_cast<size_t>(n)),
        g_old(static_cast<size_t>(n)), col_i(static_cast<size_t>(n)), col_k(static_cast<size_t>(n));
    diag(K, kdiag.data());
    // g = K w over the support, D = w^T g.
    std::vector<int64_t> supp;
    for (int64_t j = 0; j < n; ++j) {
        if (w[j] != 0.0) supp.push_back(j);
    }
    const int64_t ns = static_cast<int64_t>(supp.size());
    std::fill(g.begin(), g.end(), 0.0);
    for (int64_t a = 0; a < ns; ++a) {
        const double wa = w[supp[a]];
        column(K, P, supp[a], col_i.data());
        for (int64_t j = 0; j < n; ++j) g[j] += wa * col_i[j];
    }
    double D = 0.0;
    for (int64_t a = 0; a < ns; ++a) D += w[supp[a]] * g[supp[a]];

    const bool splx = fmt == SPLX;
    for (int64_t step = 0; step < s; ++step) {
        const int64_t i = order[step];
        const double wi = w[i];
        // Nothing to swap out, or removing i would leave (numerically) no mass behind.
        if (wi == 0.0 || std::fabs(1.0 - wi) < 1e-9) continue;
        const double D_old = D;
        g_old = g;
        column(K, P, i, col_i.data());
        // Remove i, renormalise: (g, D) <- Scale(Add(g, D, i, -w_i), 1 / (1 - w_i)).
        const double sc = 1.0 / (1.0 - wi);
        D = (D - 2.0 * wi * g[i] + wi * wi * kdiag[i]) * sc * sc;
        for (int64_t j = 0; j < n; ++j) g[j] = (g[j] - wi * col_i[j]) * sc;
        // Line search over every candidate k.
        int64_t kbest = -1;
        double Dbest = std::numeric_limits<double>::infinity(), tbest = 0.0;
#pragma omp parallel
        {
            int64_t kl = -1;
            double Dl = std::numeric_limits<double>::infinity(), tl = 0.0;
#pragma omp for schedule(static) nowait
            for (int64_t j = 0; j < n; ++j) {
                const double den = D - 2.0 * g[j] + kdiag[j];
                double t = den > 0.0 ? (D - g[j]) / den : 0.0;
                if (splx) t = t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
                const double Dj = (1.0 - t) * (1.0 - t) * D + 2.0 * t * (1.0 - t) * g[j] +
                                  t * t * kdiag[j];
                if (Dj < Dl) {
                    Dl = Dj;
                    kl = j;
                    tl = t;
                }
            }
#pragma omp critical
            {
                if (Dl < Dbest || (Dl == Dbest && kl < kbest)) {
                    Dbest = Dl;
                    kbest = kl;
                    tbest = tl;
                }
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
        column(K, P, kbest, col_k.data());
        for (int64_t j = 0; j < n; ++j) g[j] = keep * g[j] + t * col_k[j];
        D = Dbest;
    }
    return D;
}

}  // namespace sc

#include "kt_swap_ls.hpp"

#include <cmath>
#include <limits>
#include <vector>

namespace sc {

namespace {

// col[j] = k_P(x_j, x_i) for all j.
void column(const KernelSpec& K, int64_t i, double* col) {
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < K.n; ++j) col[j] = eval(K, j, i);
}

}  // namespace

double kt_swap_ls(const KernelSpec& K, double* w, const int64_t* order, int64_t s, int fmt) {
    const int64_t n = K.n;
    std::vector<double> kdiag(static_cast<size_t>(n)), g(static_cast<size_t>(n)),
        g_old(static_cast<size_t>(n)), col_i(static_cast<size_t>(n)), col_k(static_cast<size_t>(n));
    diag(K, kdiag.data());
    // g = K w over the support, D = w^T g.
    std::vector<int64_t> supp;
    for (int64_t j = 0; j < n; ++j) {
        if (w[j] != 0.0) supp.push_back(j);
    }
    const int64_t ns = static_cast<int64_t>(supp.size());
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t a = 0; a < ns; ++a) acc += w[supp[a]] * eval(K, j, supp[a]);
        g[j] = acc;
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
        column(K, i, col_i.data());
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
        column(K, kbest, col_k.data());
        for (int64_t j = 0; j < n; ++j) g[j] = keep * g[j] + t * col_k[j];
        D = Dbest;
    }
    return D;
}

}  // namespace sc

#include "kt_swap.hpp"

#include <limits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sc {

void coreset_sums(const KernelSpec& K, const int64_t* C, int64_t L, int64_t m, double* out) {
    for (int64_t l = 0; l < L; ++l) {
        const int64_t* I = C + l * m;
        std::vector<double> rows(static_cast<size_t>(m));
#pragma omp parallel for schedule(static)
        for (int64_t a = 0; a < m; ++a) {
            double s = 0.0;
            for (int64_t b = 0; b < m; ++b) s += eval(K, I[a], I[b]);
            rows[static_cast<size_t>(a)] = s;
        }
        double s = 0.0;
        for (int64_t a = 0; a < m; ++a) s += rows[static_cast<size_t>(a)];
        out[l] = s;
    }
}

int64_t kt_swap_refine(const KernelSpec& K, int64_t* I, int64_t m, int passes) {
    const int64_t n = K.n;
    std::vector<double> g(static_cast<size_t>(n)), dg(static_cast<size_t>(n)),
        col(static_cast<size_t>(n));
    diag(K, dg.data());
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        double s = 0.0;
        for (int64_t a = 0; a < m; ++a) s += eval(K, i, I[a]);
        g[static_cast<size_t>(i)] = s;
    }
    int nt = 1;
#ifdef _OPENMP
    nt = omp_get_max_threads();
#endif
    std::vector<double> bv(static_cast<size_t>(nt));
    std::vector<int64_t> bi(static_cast<size_t>(nt));
    int64_t changed = 0;
    for (int p = 0; p < passes; ++p) {
        int64_t changed_pass = 0;
        for (int64_t a = 0; a < m; ++a) {
            const int64_t cur = I[a];
            // g <- g - k(x_cur, .), Delta = 2 g + diag; first argmin, ties to the current point
#pragma omp parallel num_threads(nt)
            {
                int tid = 0;
#ifdef _OPENMP
                tid = omp_get_thread_num();
#endif
                double v = std::numeric_limits<double>::infinity();
                int64_t vi = -1;
#pragma omp for schedule(static)
                for (int64_t i = 0; i < n; ++i) {
                    const double c = eval(K, i, cur);
                    col[static_cast<size_t>(i)] = c;
                    const double gi = g[static_cast<size_t>(i)] - c;
                    g[static_cast<size_t>(i)] = gi;
                    const double delta = 2.0 * gi + dg[static_cast<size_t>(i)];
                    if (vi < 0 || delta < v) {
                        v = delta;
                        vi = i;
                    }
                }
                bv[static_cast<size_t>(tid)] = v;
                bi[static_cast<size_t>(tid)] = vi;
            }
            double best_v = std::numeric_limits<double>::infinity();
            int64_t best = -1;
            for (int k = 0; k < nt; ++k) {
                if (bi[static_cast<size_t>(k)] >= 0 && (best < 0 || bv[static_cast<size_t>(k)] < best_v)) {
                    best_v = bv[static_cast<size_t>(k)];
                    best = bi[static_cast<size_t>(k)];
                }
            }
            // keep the current point unless another is strictly better
            const double cur_v = 2.0 * g[static_cast<size_t>(cur)] + dg[static_cast<size_t>(cur)];
            if (!(best_v < cur_v)) best = cur;
            if (best == cur) {
#pragma omp parallel for schedule(static)
                for (int64_t i = 0; i < n; ++i) g[static_cast<size_t>(i)] += col[static_cast<size_t>(i)];
            } else {
#pragma omp parallel for schedule(static)
                for (int64_t i = 0; i < n; ++i) g[static_cast<size_t>(i)] += eval(K, i, best);
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

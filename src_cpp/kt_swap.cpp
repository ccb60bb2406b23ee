#include "kt_swap.hpp"

#include <algorithm>

#include "soa_kernel.hpp"

#include <limits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sc {

void coreset_sums(const KernelSpec& K, const int64_t* C, int64_t L, int64_t m, double* out) {
    DynamicTeams guard;
    for (int64_t l = 0; l < L; ++l) {
        const int64_t* I = C + l * m;
        SoAPoints P(K, m);
        for (int64_t a = 0; a < m; ++a) P.set(a, K, I[a]);
        std::vector<double> rows(static_cast<size_t>(m));
#pragma omp parallel for schedule(static) if (m >= 64)
        for (int64_t a = 0; a < m; ++a) rows[static_cast<size_t>(a)] = soa_sum(K, I[a], P, 0, m);
        double s = 0.0;
        for (int64_t a = 0; a < m; ++a) s += rows[static_cast<size_t>(a)];
        out[l] = s;
    }
}

int64_t kt_swap_refine(const KernelSpec& K, int64_t* I, int64_t m, int passes) {
    DynamicTeams guard;
    const int64_t n = K.n, nb = (n + kSoABlock - 1) / kSoABlock;
    std::vector<double> g(static_cast<size_t>(n)), dg(static_cast<size_t>(n)),
        col(static_cast<size_t>(n));
    diag(K, dg.data());
    {
        SoAPoints C(K, m);
        for (int64_t a = 0; a < m; ++a) C.set(a, K, I[a]);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) g[static_cast<size_t>(i)] = soa_sum(K, i, C, 0, m);
    }
    SoAPoints P;
    P.load_all(K);
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
            std::fill(bi.begin(), bi.end(), int64_t{-1});  // dynamic teams may be smaller
#pragma omp parallel num_threads(nt)
            {
                int tid = 0;
#ifdef _OPENMP
                tid = omp_get_thread_num();
#endif
                double v = std::numeric_limits<double>::infinity();
                int64_t vi = -1;
#pragma omp for schedule(static)
                for (int64_t blk = 0; blk < nb; ++blk) {
                    const int64_t lo = blk * kSoABlock, hi = std::min(n, lo + kSoABlock);
                    soa_eval(K, cur, P, lo, hi, col.data() + lo);
                    for (int64_t i = lo; i < hi; ++i) {
                        const double gi = g[static_cast<size_t>(i)] - col[static_cast<size_t>(i)];
                        g[static_cast<size_t>(i)] = gi;
                        const double delta = 2.0 * gi + dg[static_cast<size_t>(i)];
                        if (vi < 0 || delta < v) {
                            v = delta;
                            vi = i;
                        }
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
                for (int64_t blk = 0; blk < nb; ++blk) {
                    const int64_t lo = blk * kSoABlock, hi = std::min(n, lo + kSoABlock);
                    alignas(64) double buf[kSoABlock];
                    soa_eval(K, best, P, lo, hi, buf);
                    for (int64_t i = lo; i < hi; ++i) g[static_cast<size_t>(i)] += buf[i - lo];
                }
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

#include "rpcholesky.hpp"

#include "cancel.hpp"
#include "parallel.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sc {

namespace {
constexpr int64_t kCols = 2048;  // entries per chunk of the column update
}

int64_t weighted_rpcholesky(const KernelSpec& K, const double* sw, double* d, double* Ft,
                            int64_t rank, int64_t* pivots, int64_t i0, int64_t i1,
                            const double* u, double tol, int n_threads) {
    const int64_t n = K.n;
    if (i1 > rank) i1 = rank;
    Team team(n_threads);
    std::vector<double> col(static_cast<size_t>(n)), Fs(static_cast<size_t>(rank));
    const int64_t nch = (n + kCols - 1) / kCols;
    for (int64_t i = i0; i < i1; ++i) {
        poll_cancel();
        double total = 0.0;
        for (int64_t j = 0; j < n; ++j) total += d[j];
        if (!(total > tol)) return i;
        const double target = total * u[i - i0];
        int64_t s = 0;
        double cum = 0.0;
        for (; s < n; ++s) {
            cum += d[s];
            if (cum > target) break;
        }
        if (s >= n) s = n - 1;
        gram(K, &s, 1, nullptr, 0, col.data(), n_threads);
        const double sws = sw[s];
        double gs = col[s] * sws * sws;
        for (int64_t k = 0; k < i; ++k) {
            Fs[k] = Ft[k * n + s];
            gs -= Fs[k] * Fs[k];
        }
        if (!(gs > 0.0)) return i;
        const double inv = 1.0 / std::sqrt(gs);
        double* fi = Ft + i * n;
        team.for_chunks(nch, [&](int64_t c) {
            const int64_t j0 = c * kCols, j1 = std::min(n, j0 + kCols);
            double g[kCols];
            for (int64_t j = j0; j < j1; ++j) g[j - j0] = col[j] * sw[j] * sws;
            for (int64_t k = 0; k < i; ++k) {
                const double a = Fs[k];
                if (a == 0.0) continue;
                const double* fk = Ft + k * n;
                for (int64_t j = j0; j < j1; ++j) g[j - j0] -= fk[j] * a;
            }
            for (int64_t j = j0; j < j1; ++j) {
                const double f = g[j - j0] * inv;
                fi[j] = f;
                const double dj = d[j] - f * f;
                d[j] = (dj > 0.0 && j != s) ? dj : 0.0;
            }
        }, n * (i + 1) > kParallelWork);
        pivots[i] = s;
    }
    return i1;
}

}  // namespace sc

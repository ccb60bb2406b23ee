#include "amd.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace sc {

void amd_lowrank(const double* F, const double* res, int64_t n, int64_t r, int64_t t0,
                 int64_t steps, double eta, double* w, double* v) {
    const double ninf = -std::numeric_limits<double>::infinity();
    std::vector<double> logv(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) logv[i] = v[i] > 0.0 ? std::log(v[i]) : ninf;
    // Ftw = F^T w, Ftv = F^T v, then kept by r-vector recurrences
    std::vector<double> Ftw(static_cast<size_t>(r), 0.0), Ftv(static_cast<size_t>(r), 0.0),
        u(static_cast<size_t>(r)), acc(static_cast<size_t>(r));
    for (int64_t i = 0; i < n; ++i) {
        if (w[i] == 0.0 && v[i] == 0.0) continue;
        const double* Fi = F + i * r;
        for (int64_t k = 0; k < r; ++k) {
            Ftw[k] += w[i] * Fi[k];
            Ftv[k] += v[i] * Fi[k];
        }
    }
    for (int64_t t = t0 + 1; t <= t0 + steps; ++t) {
        const double beta = 2.0 / static_cast<double>(t + 1);
        const double c = 2.0 * static_cast<double>(t) * eta;
        // u = F^T z_t with z_t = (1 - beta) w_{t-1} + beta v_{t-1}
        for (int64_t k = 0; k < r; ++k) u[k] = (1.0 - beta) * Ftw[k] + beta * Ftv[k];
        std::fill(acc.begin(), acc.end(), 0.0);
        double M = ninf, s = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            if (logv[i] == ninf) continue;
            const double* Fi = F + i * r;
            double g = 0.0;
            for (int64_t k = 0; k < r; ++k) g += Fi[k] * u[k];
            const double zi = (1.0 - beta) * w[i] + beta * v[i];
            const double lv = logv[i] - c * (g + res[i] * zi);
            logv[i] = lv;
            if (lv > M) {  // online max: rescale what has been summed so far
                const double sc_ = std::exp(M - lv);
                s *= sc_;
                for (int64_t k = 0; k < r; ++k) acc[k] *= sc_;
                M = lv;
            }
            const double e = std::exp(lv - M);
            s += e;
            for (int64_t k = 0; k < r; ++k) acc[k] += e * Fi[k];
        }
        // v_t = e / s (normalised in the log domain), w_t = (1 - beta) w_{t-1} + beta v_t
        const double lnorm = M + std::log(s);
        for (int64_t i = 0; i < n; ++i) {
            if (logv[i] == ninf) continue;
            logv[i] -= lnorm;
            v[i] = std::exp(logv[i]);
            w[i] = (1.0 - beta) * w[i] + beta * v[i];
        }
        for (int64_t k = 0; k < r; ++k) {
            Ftv[k] = acc[k] / s;
            Ftw[k] = (1.0 - beta) * Ftw[k] + beta * Ftv[k];
        }
    }
}

}  // namespace sc

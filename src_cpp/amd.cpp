#include "amd.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "soa_kernel.hpp"  // DynamicTeams

namespace sc {

namespace {
constexpr int64_t kRows = 2048;  // rows per chunk (fixed: results independent of team size)

// <F_i, u> with 8 independent accumulators (a single one is a latency chain the compiler may
// not reorder); a fixed order, so the value does not depend on the build's vector width.
inline double dot8(const float* a, const double* u, int64_t r) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 8 <= r; k += 8)
        for (int j = 0; j < 8; ++j) s[j] += static_cast<double>(a[k + j]) * u[k + j];
    double tot = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; k < r; ++k) tot += static_cast<double>(a[k]) * u[k];
    return tot;
}
}  // namespace

void amd_lowrank(const float* F, const double* res, int64_t n, int64_t r, int64_t t0,
                 int64_t steps, double eta, double* w, double* v) {
    DynamicTeams guard;
    const double ninf = -std::numeric_limits<double>::infinity();
    const int64_t nch = (n + kRows - 1) / kRows;
    std::vector<double> logv(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) logv[i] = v[i] > 0.0 ? std::log(v[i]) : ninf;
    // per-chunk partials: F^T w, F^T v at the start; then (max, sum, F^T e) every step
    std::vector<double> pacc(static_cast<size_t>(nch * r)), pacc2(static_cast<size_t>(nch * r)),
        pM(static_cast<size_t>(nch)), ps(static_cast<size_t>(nch));
    std::vector<double> Ftw(static_cast<size_t>(r), 0.0), Ftv(static_cast<size_t>(r), 0.0),
        u(static_cast<size_t>(r)), acc(static_cast<size_t>(r));
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nch; ++c) {
        double* a = pacc.data() + c * r;
        double* b = pacc2.data() + c * r;
        std::fill(a, a + r, 0.0);
        std::fill(b, b + r, 0.0);
        for (int64_t i = c * kRows; i < std::min(n, (c + 1) * kRows); ++i) {
            if (w[i] == 0.0 && v[i] == 0.0) continue;
            const float* Fi = F + i * r;
            for (int64_t k = 0; k < r; ++k) {
                a[k] += w[i] * static_cast<double>(Fi[k]);
                b[k] += v[i] * static_cast<double>(Fi[k]);
            }
        }
    }
    for (int64_t c = 0; c < nch; ++c)
        for (int64_t k = 0; k < r; ++k) {
            Ftw[k] += pacc[c * r + k];
            Ftv[k] += pacc2[c * r + k];
        }
    for (int64_t t = t0 + 1; t <= t0 + steps; ++t) {
        const double beta = 2.0 / static_cast<double>(t + 1);
        const double cst = 2.0 * static_cast<double>(t) * eta;
        // u = F^T z_t with z_t = (1 - beta) w_{t-1} + beta v_{t-1}
        for (int64_t k = 0; k < r; ++k) u[k] = (1.0 - beta) * Ftw[k] + beta * Ftv[k];
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < nch; ++c) {
            double* a = pacc.data() + c * r;
            std::fill(a, a + r, 0.0);
            double M = ninf, s = 0.0;
            for (int64_t i = c * kRows; i < std::min(n, (c + 1) * kRows); ++i) {
                if (logv[i] == ninf) continue;
                const float* Fi = F + i * r;
                const double g = dot8(Fi, u.data(), r);
                const double zi = (1.0 - beta) * w[i] + beta * v[i];
                const double lv = logv[i] - cst * (g + res[i] * zi);
                logv[i] = lv;
                if (lv > M) {  // online max: rescale what has been summed so far
                    const double f = std::exp(M - lv);
                    s *= f;
                    for (int64_t k = 0; k < r; ++k) a[k] *= f;
                    M = lv;
                }
                const double e = std::exp(lv - M);
                s += e;
                for (int64_t k = 0; k < r; ++k) a[k] += e * static_cast<double>(Fi[k]);
            }
            pM[c] = M;
            ps[c] = s;
        }
        // merge the chunks in order
        double M = ninf;
        for (int64_t c = 0; c < nch; ++c) M = std::max(M, pM[c]);
        double s = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t c = 0; c < nch; ++c) {
            if (pM[c] == ninf) continue;
            const double f = std::exp(pM[c] - M);
            s += f * ps[c];
            for (int64_t k = 0; k < r; ++k) acc[k] += f * pacc[c * r + k];
        }
        // v_t = e / s (normalised in the log domain), w_t = (1 - beta) w_{t-1} + beta v_t
        const double lnorm = M + std::log(s);
#pragma omp parallel for schedule(static)
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

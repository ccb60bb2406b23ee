// The moments of Stein's identity per coordinate (see stein_moments.hpp).
#include "stein_moments.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cancel.hpp"

namespace sc {

void stein_moments(const double* X, const double* S, const double* w, int64_t n, int64_t d,
                   double* moments, double* out) {
    constexpr int64_t kPoll = 4096;  // rows between polls of the cancellation flag
    double* xbar = moments;
    double* sbar = moments + d;
    double* var_x = moments + 2 * d;
    double* var_s = moments + 3 * d;
    double* cov = moments + 4 * d;
    std::fill(moments, moments + 5 * d, 0.0);
    const double nd = static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) {
        if (i % kPoll == 0) poll_cancel();
        const double wi = w != nullptr ? w[i] : 1.0;
        const double* x = &X[i * d];
        const double* s = &S[i * d];
        for (int64_t c = 0; c < d; ++c) {
            xbar[c] += wi * x[c];
            sbar[c] += wi * s[c];
        }
    }
    if (w == nullptr)
        for (int64_t c = 0; c < d; ++c) {
            xbar[c] /= nd;
            sbar[c] /= nd;
        }
    std::vector<double> r(static_cast<size_t>(n));
    double rbar = 0.0, wabs = 0.0, w2 = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        if (i % kPoll == 0) poll_cancel();
        const double wi = w != nullptr ? w[i] : 1.0;
        const double* x = &X[i * d];
        const double* s = &S[i * d];
        double ri = 0.0;
        for (int64_t c = 0; c < d; ++c) {
            const double a = x[c] - xbar[c], b = s[c] - sbar[c];
            var_x[c] += wi * (a * a);
            var_s[c] += wi * (b * b);
            cov[c] += wi * (a * b);
            ri += a * b;
        }
        r[i] = ri / static_cast<double>(d);
        rbar += wi * r[i];
        wabs += std::abs(wi);
        w2 += wi * wi;
    }
    if (w == nullptr) {
        for (int64_t c = 0; c < 3 * d; ++c) var_x[c] /= nd;  // var_x, var_s and cov
        rbar /= nd;
    }
    double spread = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double t = r[i] - rbar;
        spread += (w != nullptr ? std::abs(w[i]) : 1.0) * (t * t);
    }
    out[0] = spread / wabs;
    out[1] = w != nullptr ? wabs * wabs / w2 : static_cast<double>(n);
}

}  // namespace sc

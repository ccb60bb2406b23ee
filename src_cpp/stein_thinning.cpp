#include "stein_thinning.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "cancel.hpp"
#include "parallel.hpp"
#include "soa_kernel.hpp"

namespace sc {

namespace {

struct ArgMin {
    double v;
    int64_t i;
};

// score[i] += 2 k_P(x_i, x_j) for all i (if j >= 0); return the first argmin of score.
// The per-block minima are combined in block order, so ties go to the smallest index whatever
// the number of threads.
ArgMin add_column_argmin(Team& team, const KernelSpec& K, const SoAView& P, int64_t j,
                         double* score, std::vector<ArgMin>& best) {
    const int64_t n = K.n, nb = soa_blocks(n);
    best.resize(static_cast<size_t>(nb));
    team.for_chunks(
        nb,
        [&](int64_t blk) {
            const int64_t a = blk * kSoABlock, e = std::min(n, a + kSoABlock);
            alignas(64) double buf[kSoABlock];
            double* s = score + a;
            const int64_t len = e - a;
            double v = std::numeric_limits<double>::infinity();
            if (j >= 0) {
                soa_eval(K, j, P, a, e, buf);
                for (int64_t b = 0; b < len; ++b) s[b] += 2.0 * buf[b];
            }
            // minimum in 4 independent lanes (no loop-carried dependency on one register)
            double m4[4] = {v, v, v, v};
            int64_t b = 0;
            for (; b + 4 <= len; b += 4) {
                for (int l = 0; l < 4; ++l) m4[l] = s[b + l] < m4[l] ? s[b + l] : m4[l];
            }
            for (; b < len; ++b) m4[0] = s[b] < m4[0] ? s[b] : m4[0];
            v = std::min(std::min(m4[0], m4[1]), std::min(m4[2], m4[3]));
            best[static_cast<size_t>(blk)] = ArgMin{v, a};
        },
        n >= 2048);
    ArgMin r = best[0];
    for (int64_t blk = 1; blk < nb; ++blk) {
        if (best[static_cast<size_t>(blk)].v < r.v) r = best[static_cast<size_t>(blk)];
    }
    // first index of the minimum inside the first block that attains it
    const int64_t e = std::min(n, r.i + kSoABlock);
    for (int64_t b = r.i; b < e; ++b) {
        if (score[b] == r.v) return ArgMin{r.v, b};
    }
    return r;  // NaN scores: fall back to the block start
}

}  // namespace

void stein_thinning(const KernelSpec& K, int64_t m, int64_t* out, double* score, int n_threads) {
    const int64_t n = K.n;
    std::vector<double> own;
    if (score == nullptr) {
        own.resize(static_cast<size_t>(n));
        score = own.data();
    }
    const AllPoints all(K);
    Team team(n_threads);
    std::vector<ArgMin> best;
    diag(K, score, n_threads);
    int64_t j = add_column_argmin(team, K, all.view(), -1, score, best).i;
    for (int64_t t = 0; t < m; ++t) {
        poll_cancel();
        out[t] = j;
        if (t + 1 < m) j = add_column_argmin(team, K, all.view(), j, score, best).i;
    }
}

}  // namespace sc

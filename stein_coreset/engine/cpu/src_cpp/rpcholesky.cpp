#include "rpcholesky.hpp"

#include "parallel.hpp"
#include "soa_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sc {

namespace {
// entries per chunk of the column update (a multiple of kSoABlock): n = 2^15 .. 2^16 points make
// 32 .. 64 chunks, several per member of a 16-thread team
constexpr int64_t kCols = 1024;
}

int64_t weighted_rpcholesky(const KernelSpec& K, const double* sw, double* d, double* Ft,
                            int64_t rank, int64_t* pivots, int64_t i0, int64_t i1,
                            const double* u, double tol, int n_threads) {
    const int64_t n = K.n;
    if (i1 > rank) i1 = rank;
    if (i0 >= i1) return i1;
    const AllPoints all(K);
    const SoAView& P = all.view();
    std::vector<double> Fs(static_cast<size_t>(rank));
    const int64_t nch = (n + kCols - 1) / kCols;
    // per chunk: the sum of d over its entries in index order, written by the chunk that
    // updates them, so that the serial part of a step reads nch sums and one chunk, not all n
    std::vector<double> dsum(static_cast<size_t>(nch));
    for (int64_t c = 0; c < nch; ++c) {
        double a = 0.0;
        for (int64_t j = c * kCols; j < std::min(n, (c + 1) * kCols); ++j) a += d[j];
        dsum[static_cast<size_t>(c)] = a;
    }
    Team team(n_threads);
    // i1 - i0 steps of n kernel entries and ~i n multiply-adds
    const double step_ns = static_cast<double>(n) *
                           (entry_ns(K.d) + 0.25 * static_cast<double>(i0 + i1) / 2.0);
    const int M = team.members_for(step_ns, nch, i1 - i0);
    // the pivot of step i and its column's scale, chosen by the serial part of the step
    int64_t s = 0, stop = i1;
    double sws = 0.0, inv = 0.0;
    auto choose = [&](int64_t i) {
        // the pivot: the first s whose running sum of d passes u sum(d), the running sum taken
        // chunk by chunk (the chunks' sums in order, then the entries of the chunk holding it)
        double total = 0.0;
        for (int64_t c = 0; c < nch; ++c) total += dsum[static_cast<size_t>(c)];
        if (!(total > tol)) return false;
        const double target = total * u[i - i0];
        double pre = 0.0;
        int64_t c = 0;
        for (; c < nch && !(pre + dsum[static_cast<size_t>(c)] > target); ++c)
            pre += dsum[static_cast<size_t>(c)];
        s = n - 1;  // no chunk passes (the target rounded up to sum(d))
        if (c < nch) {
            // the entries' sum may round below the chunk's: then its last positive entry
            int64_t last = -1;
            double a = pre;
            for (int64_t j = c * kCols; j < std::min(n, (c + 1) * kCols); ++j) {
                if (d[j] > 0.0) last = j;
                a += d[j];
                if (a > target) {
                    last = j;
                    break;
                }
            }
            if (last >= 0) s = last;
        }
        // k(x_s, x_s) as the column computes it (the evaluator's block holding s)
        alignas(64) double buf[kSoABlock];
        const int64_t b0 = (s / kSoABlock) * kSoABlock;
        soa_eval(K, s, P, b0, std::min(n, b0 + kSoABlock), buf);
        sws = sw[s];
        double gs = buf[s - b0] * sws * sws;
        for (int64_t k = 0; k < i; ++k) {
            Fs[k] = Ft[k * n + s];
            gs -= Fs[k] * Fs[k];
        }
        if (!(gs > 0.0)) return false;
        inv = 1.0 / std::sqrt(gs);
        return true;
    };
    if (!choose(i0)) return i0;
    // step q = pivot i0 + q: column, factor row and residual diagonal over fixed chunks, then
    // (the last arriver) the next pivot
    team.steps(
        M, i1 - i0, [nch](int64_t) { return nch; },
        [&](int64_t q, int64_t c, int) {
            const int64_t i = i0 + q, j0 = c * kCols, j1 = std::min(n, j0 + kCols);
            double g[kCols];
            for (int64_t b0 = j0; b0 < j1; b0 += kSoABlock)
                soa_eval(K, s, P, b0, std::min(j1, b0 + kSoABlock), g + (b0 - j0));
            for (int64_t j = j0; j < j1; ++j) g[j - j0] = g[j - j0] * sw[j] * sws;
            for (int64_t k = 0; k < i; ++k) {
                const double a = Fs[k];
                if (a == 0.0) continue;
                const double* fk = Ft + k * n;
                for (int64_t j = j0; j < j1; ++j) g[j - j0] -= fk[j] * a;
            }
            double* fi = Ft + i * n;
            double ds = 0.0;
            for (int64_t j = j0; j < j1; ++j) {
                const double f = g[j - j0] * inv;
                fi[j] = f;
                const double dj = d[j] - f * f;
                d[j] = (dj > 0.0 && j != s) ? dj : 0.0;
                ds += d[j];
            }
            dsum[static_cast<size_t>(c)] = ds;
        },
        [&](int64_t q) {
            const int64_t i = i0 + q;
            pivots[i] = s;
            if (i + 1 < i1 && !choose(i + 1)) {
                stop = i + 1;
                return false;
            }
            return true;
        });
    return stop;
}

}  // namespace sc

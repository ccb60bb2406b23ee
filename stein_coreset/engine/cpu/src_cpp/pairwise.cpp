// Pairwise squared distances and their median on the team (see pairwise.hpp). Built with
// -ffp-contract=off (src_cpp/meson.build) so that no compiler fuses t * t + q into an FMA: the
// distances must equal NumPy's bit for bit.
#include "pairwise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "cancel.hpp"
#include "parallel.hpp"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace sc {

namespace {

constexpr int64_t kRowsPerChunk = 8;                // rows of the triangle per claimed chunk
constexpr int64_t kSample = 16384;                  // sampled pairs that bracket the median
constexpr int64_t kMargin = 256;                    // 4 sd of a sample rank, 2 sqrt(kSample)
constexpr int64_t kBracketMin = int64_t{1} << 16;   // below this N, nth_element directly

// coordinate-major copy: coordinate c of point i at Us[c * m + i], so that the inner loop over
// j reads contiguous memory and vectorises
std::vector<double> coordinate_major(const double* U, int64_t m, int64_t d) {
    std::vector<double> Us(static_cast<size_t>(m * d));
    for (int64_t i = 0; i < m; ++i)
        for (int64_t c = 0; c < d; ++c) Us[static_cast<size_t>(c * m + i)] = U[i * d + c];
    return Us;
}

// out[k] = q_{i, i+1+k} for k < m - 1 - i, in the order of pairwise.hpp
inline void distance_row(const double* us, int64_t m, int64_t d, int64_t i, double* out) {
    const int64_t len = m - 1 - i;
    for (int64_t k = 0; k < len; ++k) out[k] = 0.0;
    for (int64_t c = 0; c < d; ++c) {
        const double uic = us[c * m + i];
        const double* col = us + c * m + i + 1;
#pragma omp simd
        for (int64_t k = 0; k < len; ++k) {
            const double t = uic - col[k];
            const double tt = t * t;
            out[k] = out[k] + tt;
        }
    }
}

int64_t nchunks_of(int64_t m) { return (m - 1 + kRowsPerChunk - 1) / kRowsPerChunk; }

bool worth_threads(int64_t m, int64_t d) {
    return (m * (m - 1) / 2) * (d > 0 ? d : 1) > kParallelWork;
}

void distances_on(Team& team, const double* us, int64_t m, int64_t d, double* q) {
    team.for_chunks(
        nchunks_of(m),
        [&](int64_t ch) {
            poll_cancel();
            const int64_t i1 = std::min(m - 1, (ch + 1) * kRowsPerChunk);
            for (int64_t i = ch * kRowsPerChunk; i < i1; ++i)
                distance_row(us, m, d, i, q + row_offset(i, m));
        },
        worth_threads(m, d));
}

// a = q_(klo), b = q_(khi) by std::nth_element on all of q (reorders q).
void select_serial(double* q, int64_t N, int64_t klo, int64_t khi, double* a, double* b) {
    std::nth_element(q, q + khi, q + N);
    *b = q[khi];
    *a = klo == khi ? *b : *std::max_element(q, q + khi);
}

// The same without storing q: pivots lo <= hi from kSample evenly spaced pairs, then one pass on
// the team computes the distances row block by row block, counts those below lo and keeps those
// in [lo, hi]; nth_element finishes on the kept ones. False when the bracket misses.
bool select_bracket(Team& team, const double* us, int64_t m, int64_t d, int64_t klo,
                    int64_t khi, bool miss, double* a, double* b) {
    const int64_t N = m * (m - 1) / 2;
    std::vector<double> s(static_cast<size_t>(kSample));
    {
        int64_t i = 0;
        for (int64_t t = 0; t < kSample; ++t) {
            const int64_t p = (t * N) / kSample;  // increasing in t
            while (row_offset(i + 1, m) <= p) ++i;
            const int64_t j = i + 1 + (p - row_offset(i, m));
            double q = 0.0;
            for (int64_t c = 0; c < d; ++c) {
                const double u = us[c * m + i] - us[c * m + j];
                const double uu = u * u;
                q = q + uu;
            }
            s[static_cast<size_t>(t)] = q;
        }
    }
    const int64_t ilo = klo * kSample / N - kMargin;
    const int64_t ihi = khi * kSample / N + kMargin;
    double lo = -std::numeric_limits<double>::infinity();
    double hi = std::numeric_limits<double>::infinity();
    if (ilo >= 0) {
        std::nth_element(s.begin(), s.begin() + ilo, s.end());
        lo = s[static_cast<size_t>(ilo)];
    }
    if (ihi < kSample) {
        std::nth_element(s.begin() + (ilo >= 0 ? ilo : 0), s.begin() + ihi, s.end());
        hi = s[static_cast<size_t>(ihi)];
    }
    if (miss) lo = hi = -std::numeric_limits<double>::infinity();  // tests: force the fallback
    const int64_t nchunks = nchunks_of(m);
    std::vector<int64_t> below(static_cast<size_t>(nchunks)), inside(static_cast<size_t>(nchunks));
    std::vector<std::unique_ptr<double[]>> kept(static_cast<size_t>(nchunks));
    team.for_chunks(
        nchunks,
        [&](int64_t ch) {
            poll_cancel();
            const int64_t i0 = ch * kRowsPerChunk, i1 = std::min(m - 1, i0 + kRowsPerChunk);
            const int64_t cap = row_offset(i1, m) - row_offset(i0, m);
            std::unique_ptr<double[]> row(new double[static_cast<size_t>(m)]);
            std::unique_ptr<double[]> keep(new double[static_cast<size_t>(cap)]);
            double* kp = keep.get();
            int64_t nb = 0, ni = 0;
            for (int64_t i = i0; i < i1; ++i) {
                distance_row(us, m, d, i, row.get());
                const int64_t len = m - 1 - i;
                for (int64_t k = 0; k < len; ++k) {  // branch-free: store, advance if inside
                    const double x = row[k];
                    nb += x < lo;
                    kp[ni] = x;
                    ni += (x >= lo) & (x <= hi);
                }
            }
            below[static_cast<size_t>(ch)] = nb;
            inside[static_cast<size_t>(ch)] = ni;
            kept[static_cast<size_t>(ch)] = std::move(keep);
        },
        worth_threads(m, d));
    int64_t nbelow = 0, ninside = 0;
    for (int64_t ch = 0; ch < nchunks; ++ch) {
        nbelow += below[static_cast<size_t>(ch)];
        ninside += inside[static_cast<size_t>(ch)];
    }
    if (nbelow > klo || nbelow + ninside <= khi) return false;
    std::unique_ptr<double[]> buf(new double[static_cast<size_t>(ninside)]);
    double* out = buf.get();
    for (int64_t ch = 0; ch < nchunks; ++ch) {
        const double* src = kept[static_cast<size_t>(ch)].get();
        out = std::copy(src, src + inside[static_cast<size_t>(ch)], out);
    }
    kept.clear();
    select_serial(buf.get(), ninside, klo - nbelow, khi - nbelow, a, b);
    return true;
}

}  // namespace

void pairwise_sq_distances(const double* U, int64_t m, int64_t d, double* q, int n_threads) {
    if (m < 2) return;
    const std::vector<double> Us = coordinate_major(U, m, d);
    Team team(n_threads);
    distances_on(team, Us.data(), m, d, q);
}

double median_pairwise_distance(const double* U, int64_t m, int64_t d, int n_threads,
                                int select) {
    const int64_t N = m * (m - 1) / 2;  // m >= 2: N >= 1
    const int64_t klo = (N - 1) / 2, khi = N / 2;
    const std::vector<double> Us = coordinate_major(U, m, d);
    Team team(n_threads);
    double a = 0.0, b = 0.0;
    if (select == kSelectAll || N < kBracketMin ||
        !select_bracket(team, Us.data(), m, d, klo, khi, select == kSelectBracketMiss, &a, &b)) {
        std::unique_ptr<double[]> q(new double[static_cast<size_t>(N)]);
        distances_on(team, Us.data(), m, d, q.get());
        select_serial(q.get(), N, klo, khi, &a, &b);
    }
    const double sb = std::sqrt(b);
    if (klo == khi) return sb;
    const double sa = std::sqrt(a);
    return (sa + sb) / 2.0;
}

}  // namespace sc

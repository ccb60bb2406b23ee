#include "stein_thinning.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "parallel.hpp"
#include "progress.hpp"
#include "soa_kernel.hpp"

namespace sc {

namespace {

struct ArgMin {
    double v;
    int64_t i;
};

// Points per chunk of a step: a function of nothing (never of the team), four evaluator blocks,
// so a member's share of a step is a few contiguous chunks that stay in its caches.
constexpr int64_t kChunk = 4 * kSoABlock;

// Stein thinning picks the same points again and again (on a biased chain at d = 50, some 190
// distinct points in 8192 steps): the column of a point picked before is read back from a cache
// of the columns already evaluated, the same values bit for bit, instead of being evaluated
// again, from d = kColumnCacheMinD on, where that pays. The cache holds at most
// column_cache_bytes(n, m, d) of columns (stein_thinning.hpp); picks beyond it are evaluated.

// The column step t adds: `cached` (a column evaluated before) or, when `fill` is set, one to
// evaluate and keep there for the later picks of the same point.
struct Column {
    const double* cached = nullptr;
    double* fill = nullptr;
};

// score[i] += 2 k_P(x_i, x_j) for i in [a, e) (if j >= 0; j = -2: score[i] = k_P(x_i, x_i)
// first); returns the minimum over [a, e) and the start of the first evaluator block that attains
// it (the first block if all are NaN). The lexicographic minimum of these (value, block) pairs
// over any grouping of the chunks is the first block of the whole score that attains its minimum,
// so the result does not depend on n_threads; the last arriver then finds the first index of the
// minimum in that one block (as a serial pass would).
ArgMin chunk_argmin(const KernelSpec& K, const SoAView& P, int64_t j, const Column& col,
                    double* score, int64_t a, int64_t e) {
    ArgMin r{std::numeric_limits<double>::infinity(), a};
    alignas(64) double buf[kSoABlock];
    for (int64_t b0 = a; b0 < e; b0 += kSoABlock) {
        const int64_t b1 = std::min(e, b0 + kSoABlock), len = b1 - b0;
        double* s = score + b0;
        if (j == -2) {
            for (int64_t b = 0; b < len; ++b) s[b] = soa_entry(K, b0 + b, b0 + b);
        } else if (col.cached != nullptr) {
            const double* c = col.cached + b0;
            for (int64_t b = 0; b < len; ++b) s[b] += 2.0 * c[b];
        } else if (j >= 0) {
            double* v = col.fill != nullptr ? col.fill + b0 : buf;
            soa_eval(K, j, P, b0, b1, v);
            for (int64_t b = 0; b < len; ++b) s[b] += 2.0 * v[b];
        }
        // minimum in 4 independent lanes (no loop-carried dependency on one register)
        const double inf = std::numeric_limits<double>::infinity();
        double m4[4] = {inf, inf, inf, inf};
        int64_t b = 0;
        for (; b + 4 <= len; b += 4) {
            for (int l = 0; l < 4; ++l) m4[l] = s[b + l] < m4[l] ? s[b + l] : m4[l];
        }
        for (; b < len; ++b) m4[0] = s[b] < m4[0] ? s[b] : m4[0];
        const double v = std::min(std::min(m4[0], m4[1]), std::min(m4[2], m4[3]));
        if (b0 == a || v < r.v) r = ArgMin{v, b0};
    }
    return r;
}

inline bool before(const ArgMin& x, const ArgMin& y) {
    return x.v < y.v || (x.v == y.v && x.i < y.i);
}

struct Slot {
    int64_t step;  // s + 1 of the step this partial belongs to (0: none)
    ArgMin best;
};

}  // namespace

void stein_thinning(const KernelSpec& K, int64_t m, int64_t* out, double* score, int n_threads,
                    double cache_bytes) {
    const int64_t n = K.n;
    if (m <= 0) {
        if (score != nullptr) diag(K, score, n_threads);
        return;
    }
    // without a caller's buffer, the score's pages are first touched by the members that own
    // them (step 0 writes them)
    std::unique_ptr<double[]> own;
    if (score == nullptr) {
        own.reset(new double[static_cast<size_t>(n)]);
        score = own.get();
    }
    const AllPoints all(K);
    const SoAView& P = all.view();
    const int64_t nch = (n + kChunk - 1) / kChunk;
    Team team(n_threads);
    // m steps of n kernel evaluations each
    const int M = team.members_for(static_cast<double>(n) * entry_ns(K.d), nch, m);
    std::vector<Padded<Slot>> slot(static_cast<size_t>(M));
    // the column cache: point -> its column, filled by the step that first adds it
    const int64_t max_columns =
        static_cast<int64_t>((cache_bytes < 0.0 ? column_cache_bytes(n, m, K.d) : cache_bytes) /
                             (8.0 * static_cast<double>(n)));
    constexpr int32_t kNeverPicked = -1, kPickedOnce = -2;
    std::vector<int32_t> cached_as(static_cast<size_t>(max_columns > 0 ? n : 0), kNeverPicked);
    std::vector<std::unique_ptr<double[]>> columns;
    Column next;  // the column of the coming step, set by the previous step's last arriver
    // step t: add the column of out[t - 1] (step 0: write the diagonal), out[t] = first argmin;
    // each member keeps the best of its chunks, the last arriver takes the best of the members
    team.steps(
        M, m, [nch](int64_t) { return nch; },
        [&](int64_t t, int64_t c, int k) {
            const int64_t j = t == 0 ? -2 : out[t - 1];
            const ArgMin r =
                chunk_argmin(K, P, j, next, score, c * kChunk, std::min(n, (c + 1) * kChunk));
            Slot& sl = slot[static_cast<size_t>(k)].v;
            if (sl.step != t + 1 || before(r, sl.best)) sl = Slot{t + 1, r};
        },
        [&](int64_t t) {
            bool any = false;
            ArgMin r{0.0, 0};
            for (const auto& p : slot) {
                if (p.v.step == t + 1 && (!any || before(p.v.best, r))) {
                    r = p.v.best;
                    any = true;
                }
            }
            // first index of the minimum inside the first block that attains it
            const int64_t e = std::min(n, r.i + kSoABlock);
            int64_t i = r.i;  // NaN scores: the block start
            for (int64_t b = r.i; b < e; ++b) {
                if (score[b] == r.v) {
                    i = b;
                    break;
                }
            }
            out[t] = i;
            next = Column{};
            if (max_columns > 0) {
                // a point's column is kept from its second pick on: a run whose picks are all
                // distinct (m small against n) allocates and writes nothing
                int32_t& at = cached_as[static_cast<size_t>(i)];
                if (at >= 0) {
                    next.cached = columns[static_cast<size_t>(at)].get();
                } else if (at == kPickedOnce &&
                           static_cast<int64_t>(columns.size()) < max_columns) {
                    columns.emplace_back(new double[static_cast<size_t>(n)]);
                    at = static_cast<int32_t>(columns.size() - 1);
                    next.fill = columns.back().get();
                } else if (at == kNeverPicked) {
                    at = kPickedOnce;
                }
            }
            progress_add(1);
            return true;
        });
}

}  // namespace sc

#include "kt_split.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "parallel.hpp"
#include "progress.hpp"
#include "soa_kernel.hpp"

namespace sc {

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// The seed of the random stream (std::mt19937_64) of halving l in round j.
uint64_t halving_seed(uint64_t seed, int j, int64_t l) {
    return splitmix64(seed ^
                      splitmix64((static_cast<uint64_t>(j) << 40) + static_cast<uint64_t>(l)));
}

// Slots of the walk summed per chunk: fixed, so the value does not depend on the number of
// threads.
constexpr int64_t kChunk = 512;

// Pairs whose walk sums over the children before them are formed together: 2 kBatch rows (the
// pairs' points) as one tile against the packed children, so each child's coordinates are read
// once per batch instead of once per pair (a pair alone is two rows against every child: at
// d = 50, n = 2^14 that took three times as long). A batch never crosses a chunk.
constexpr int64_t kBatch = 32;
static_assert(kChunk % kBatch == 0 && kChunk % kSoABlock == 0, "a batch lies in one chunk");

int64_t walk_chunks(int64_t len) { return (len + kChunk - 1) / kChunk; }

// One kernel halving of in[0..len) into left/right (floor(len/2) each), pair by pair: the walk
// state of Alg. 1a. decide(k, alpha) is the whole per-pair rule. The inner product alpha of
// pair k,
//   alpha = sum over children l < k of k(x1, R_l) - k(x1, L_l) + k(x2, L_l) - k(x2, R_l),
// is summed in chunks of kChunk children, each of its four sums child by child in order, each
// chunk's (r1 - r2) - (l1 - l2) added in chunk order: for a batch of pairs [k0, k1) the sums over
// the children [0, k0) come from one tile per chunk (batch_chunk, on any thread), and each pair
// continues its last chunk's sums child by child over [k0, k) before deciding (batch_end). The
// values are the same whichever batch and thread formed them.
struct Halving {
    const KernelSpec& K;
    const int64_t* in;
    int64_t pairs;
    double log_mult;
    std::mt19937_64 gen;
    const double* uniforms;
    int64_t* left;
    int64_t* right;
    PackedPoints L, R;
    double sig2 = 0.0;
    // the batch's pairs of two points (a repeated point needs no walk), their points as rows
    // (pair live[r / 2], point r % 2), and the chunk sums of those rows over the children before
    // the batch: sums[(r * 2 + side) * nck + c], side 0 the right children, 1 the left
    std::vector<int64_t> live, rows;
    std::vector<double> sums;
    int64_t nck = 0;

    Halving(const KernelSpec& K_, const int64_t* in_, int64_t len, double log_mult_,
            uint64_t seed, const double* u, int64_t* l, int64_t* r)
        : K(K_), in(in_), pairs(len / 2), log_mult(log_mult_), gen(seed), uniforms(u), left(l),
          right(r), L(K_, len / 2), R(K_, len / 2) {}

    // a repeated point (multiplicity): b = 0, the walk and sigma are unchanged and both
    // children get the point, so the pair costs nothing (its uniform is still drawn)
    bool repeat(int64_t k) const { return in[2 * k] == in[2 * k + 1]; }

    void decide(int64_t k, double alpha) {
        const int64_t x1 = in[2 * k], x2 = in[2 * k + 1];
        if (x1 == x2) {
            if (!uniforms) gen();
            left[k] = right[k] = x1;
            L.set(k, K, x1);
            R.set(k, K, x1);
            return;
        }
        const double b2 =
            soa_entry(K, x1, x1) + soa_entry(K, x2, x2) - 2.0 * soa_entry(K, x1, x2);
        double thresh = std::sqrt(std::max(sig2 * b2 * log_mult, 0.0));
        if (b2 > thresh) thresh = b2;
        if (sig2 == 0.0) {
            sig2 = std::max(b2, 0.0);
        } else if (thresh != 0.0) {
            const double upd = 1.0 + (b2 / thresh - 2.0) * sig2 / thresh;
            if (upd > 0.0) sig2 += b2 * upd;
        }
        if (!(thresh > 0.0)) thresh = 1.0;  // b = 0: the pair is one point, either way is fine
        const double prob_x2_left = 0.5 * (1.0 - alpha / thresh);
        const double u = uniforms ? uniforms[k]
                                  : static_cast<double>(gen() >> 11) * 0x1.0p-53;
        const bool swap = u <= prob_x2_left;
        left[k] = swap ? x2 : x1;
        right[k] = swap ? x1 : x2;
        L.set(k, K, left[k]);
        R.set(k, K, right[k]);
    }

    // the batch after k0: [k0, k1), within k0's chunk
    int64_t batch_end_of(int64_t k0) const {
        return std::min(pairs, (k0 / kBatch + 1) * kBatch);
    }

    void batch_begin(int64_t k0, int64_t k1) {
        nck = walk_chunks(k0);
        live.clear();
        rows.clear();
        for (int64_t k = k0; k < k1; ++k) {
            if (repeat(k)) continue;
            live.push_back(k);
            rows.push_back(in[2 * k]);
            rows.push_back(in[2 * k + 1]);
        }
        sums.assign(rows.size() * 2 * static_cast<size_t>(nck), 0.0);
    }

    // chunk c (< nck) of the batch's sums: its rows against the children of chunk c before k0
    void batch_chunk(int64_t k0, int64_t c) {
        alignas(64) double buf[kSoARows * kSoABlock];
        const int64_t nr = static_cast<int64_t>(rows.size());
        for (int side = 0; side < 2; ++side) {
            const PackedPoints& S = side == 0 ? R : L;
            for (int64_t b0 = c * kChunk; b0 < std::min(k0, (c + 1) * kChunk); b0 += kSoABlock) {
                const int64_t b1 = std::min(k0, b0 + kSoABlock);
                const PackedView v = S.view(b0, b1);
                for (int64_t r0 = 0; r0 < nr; r0 += kSoARows) {
                    const int64_t real = std::min(kSoARows, nr - r0);
                    int64_t grp[kSoARows];
                    for (int64_t r = 0; r < kSoARows; ++r) grp[r] = rows[r0 + std::min(r, real - 1)];
                    soa_eval_rows_packed(K, grp, v, 0, buf, kSoABlock);
                    auto at = [&](int64_t r) -> double& {
                        return sums[static_cast<size_t>(((r0 + r) * 2 + side) * nck + c)];
                    };
                    double s[kSoARows] = {};
                    for (int64_t r = 0; r < real; ++r) s[r] = at(r);
                    rows_dot(buf, nullptr, b1 - b0, s);
                    for (int64_t r = 0; r < real; ++r) at(r) = s[r];
                }
            }
        }
    }

    // the batch's pairs in order, each continuing its sums over the children [k0, k)
    void batch_end(int64_t k0, int64_t k1) {
        alignas(64) double buf[2 * kPackLanes];
        const int64_t c0 = k0 / kChunk;
        size_t next = 0;  // the next pair of `live`
        for (int64_t k = k0; k < k1; ++k) {
            double alpha = 0.0;
            if (next < live.size() && live[next] == k) {
                const int64_t r = 2 * static_cast<int64_t>(next++), nc = walk_chunks(k);
                for (int64_t c = 0; c < nc; ++c) {
                    double s[2][2];  // [side][point]
                    for (int side = 0; side < 2; ++side)
                        for (int p = 0; p < 2; ++p)
                            s[side][p] = c < nck ? sums[static_cast<size_t>(
                                                       ((r + p) * 2 + side) * nck + c)]
                                                 : 0.0;
                    if (c == c0) {
                        for (int side = 0; side < 2; ++side) {
                            const PackedPoints& S = side == 0 ? R : L;
                            for (int64_t g = k0 / kPackLanes; g * kPackLanes < k; ++g) {
                                const int64_t a = std::max(k0, g * kPackLanes) - g * kPackLanes;
                                const int64_t e = std::min(k, (g + 1) * kPackLanes) - g * kPackLanes;
                                soa_eval_rows2(K, in + 2 * k, S.group(g), a, e, buf, kPackLanes);
                                for (int64_t b = 0; b < e - a; ++b) {
                                    s[side][0] += buf[b];
                                    s[side][1] += buf[kPackLanes + b];
                                }
                            }
                        }
                    }
                    alpha += (s[0][0] - s[0][1]) - (s[1][0] - s[1][1]);
                }
            }
            decide(k, alpha);
            progress_add(k + 1);
        }
    }

    // pairs [k0, k1) of the halving on the calling thread
    void run(int64_t k0, int64_t k1) {
        while (k0 < k1) {
            poll_cancel();  // Ctrl-C (cancel.hpp): a serial halving may take seconds
            const int64_t e = std::min(k1, batch_end_of(k0));
            batch_begin(k0, e);
            for (int64_t c = 0; c < nck; ++c) batch_chunk(k0, c);
            batch_end(k0, e);
            k0 = e;
        }
    }
};

// The halvings hs[0..) of one round (fewer than the team) run together, batch by batch: one
// region step per batch of pair indices, its chunks the walk chunks of every halving before the
// batch (so even one halving has a team's worth of chunks once its walk is long), the last
// arriver taking each halving's decisions for the batch. The team grows with the walk: batches
// from k0 on run on the members their work pays for. While the walks are short (a step would not
// pay for more than H members), each halving runs its first pairs on a member of its own, with
// no barrier at all, and the halvings meet for the rest: the early pairs of a round with several
// halvings do not serialise. A halving's decisions do not depend on which path ran its pairs.
void halve_together(Team& team, std::vector<Halving>& hs) {
    const int64_t H = static_cast<int64_t>(hs.size()), pairs = hs[0].pairs;
    const double entry = entry_ns(hs[0].K.d);
    // a batch from k: 4 kBatch k entries in each halving
    auto members_at = [&](int64_t k) {
        return team.members_for(static_cast<double>(4 * H * kBatch * k) * entry,
                                H * walk_chunks(k));
    };
    int64_t first = 0;  // pairs [0, first) run halving by halving
    if (H > 1) {
        while (first < pairs && members_at(first) <= H) first = std::min(pairs, first + kChunk);
        // their work: 4 k entries for pair k of each halving
        const double work = 4.0 * static_cast<double>(H) * 0.5 * static_cast<double>(first) *
                            static_cast<double>(first) * entry;
        team.for_chunks_on(team.members_for(work, H, 1), H,
                           [&](int64_t l) { hs[static_cast<size_t>(l)].run(0, first); });
    }
    // the batches from k0 on, until the team size changes (segments of whole chunks)
    for (int64_t k0 = first; k0 < pairs;) {
        const int M = members_at(k0);
        int64_t k1 = std::min(pairs, (k0 / kChunk + 1) * kChunk);
        while (k1 < pairs && members_at(k1) == M) k1 = std::min(pairs, k1 + kChunk);
        const int64_t nb = (k1 - k0 + kBatch - 1) / kBatch;  // k0 is a multiple of kBatch
        auto lo = [&](int64_t s) { return k0 + s * kBatch; };
        auto hi = [&](int64_t s) { return std::min(k1, lo(s) + kBatch); };
        for (Halving& hv : hs) hv.batch_begin(lo(0), hi(0));
        team.steps(
            M, nb, [&](int64_t s) { return H * walk_chunks(lo(s)); },
            [&](int64_t s, int64_t c, int) {
                const int64_t nc = walk_chunks(lo(s));
                if (nc == 0) return;
                hs[static_cast<size_t>(c / nc)].batch_chunk(lo(s), c % nc);
            },
            [&](int64_t s) {
                for (Halving& hv : hs) hv.batch_end(lo(s), hi(s));
                if (s + 1 < nb)
                    for (Halving& hv : hs) hv.batch_begin(lo(s + 1), hi(s + 1));
                return true;
            });
        k0 = k1;
    }
}

// single-thread ns of a round: 2 ncore half^2 entries in ncore independent halvings
double round_ns(int64_t ncore, int64_t half, int64_t d) {
    return 2.0 * static_cast<double>(ncore) * static_cast<double>(half) *
           static_cast<double>(half) * entry_ns(d);
}

}  // namespace

bool kt_split_pairs_together(int n_threads, int64_t ncore, int64_t half, int64_t d) {
    if (ncore >= n_threads) return false;
    // the round's work split as finely as the team: does it pay for a second member? (sized
    // by its ncore halvings it could not: the first round has one)
    return team_members(n_threads, round_ns(ncore, half, d), n_threads, 1) > 1;
}

// One round of `ncore` independent halvings of 2 half points each, halving l made by make(l).
template <class Make>
void halve_round(Team& team, const KernelSpec& K, int64_t ncore, int64_t half, Make&& make) {
    if (!kt_split_pairs_together(team.size(), ncore, half, K.d)) {
        // enough coresets for the team (or too little work): one whole halving per chunk
        const int outer = team.members_for(round_ns(ncore, half, K.d), ncore, 1);
        team.for_chunks_on(outer, ncore, [&](int64_t l) {
            Halving h = make(l);
            h.run(0, h.pairs);
        });
    } else {
        std::vector<Halving> hs;
        hs.reserve(static_cast<size_t>(ncore));
        for (int64_t l = 0; l < ncore; ++l) hs.push_back(make(l));
        halve_together(team, hs);
    }
}

void kt_split_uniforms(int64_t N, int t, uint64_t seed, double* out) {
    const int64_t row = N / 2;
    int64_t size = N;
    for (int j = 0; j < t; ++j) {
        const int64_t half = size / 2;
        for (int64_t l = 0; l < (int64_t{1} << j); ++l) {
            std::mt19937_64 gen(halving_seed(seed, j, l));
            double* u = out + j * row + l * half;
            for (int64_t k = 0; k < half; ++k)
                u[k] = static_cast<double>(gen() >> 11) * 0x1.0p-53;
        }
        size = half;
    }
}

int64_t kt_split_size(int64_t N, int t) {
    for (int j = 0; j < t; ++j) N /= 2;
    return N;
}

void kt_split(const KernelSpec& K, const int64_t* idx, int64_t N, int t, double delta,
              uint64_t seed, const double* uniforms, int64_t* out, int n_threads) {
    if (t <= 0) {
        std::copy(idx, idx + N, out);
        return;
    }
    const int nthreads = n_threads < 1 ? 1 : n_threads;
    Team team(nthreads);
    const double base_log_mult = 2.0 * std::log(2.0 * static_cast<double>(N) * t / delta);
    std::vector<int64_t> cur(idx, idx + N), next;
    int64_t size = N;  // size of each coreset of the current round
    const int64_t row = N / 2;
    for (int j = 0; j < t; ++j) {
        const int64_t ncore = int64_t{1} << j;
        const int64_t half = size / 2;
        next.assign(static_cast<size_t>(2 * ncore * half), -1);
        const double log_mult = base_log_mult - 2.0 * j * std::log(2.0);
        auto make = [&](int64_t l) {
            const uint64_t s = halving_seed(seed, j, l);
            const double* u = uniforms ? uniforms + j * row + l * half : nullptr;
            return Halving(K, cur.data() + l * size, size, log_mult, s, u,
                           next.data() + (2 * l) * half, next.data() + (2 * l + 1) * half);
        };
        halve_round(team, K, ncore, half, make);
        cur.swap(next);
        size = half;
    }
    std::copy(cur.begin(), cur.end(), out);
}

void kt_halvings(const KernelSpec& K, const int64_t* blocks, int64_t B, int64_t N, double delta,
                 const uint64_t* seeds, int64_t* out, int n_threads) {
    if (B < 1 || N < 2) return;
    Team team(n_threads < 1 ? 1 : n_threads);
    const double log_mult = 2.0 * std::log(2.0 * static_cast<double>(N) / delta);
    const int64_t half = N / 2;
    halve_round(team, K, B, half, [&](int64_t l) {
        return Halving(K, blocks + l * N, N, log_mult, halving_seed(seeds[l], 0, 0), nullptr,
                       out + (2 * l) * half, out + (2 * l + 1) * half);
    });
}

}  // namespace sc

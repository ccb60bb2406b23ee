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

// sum over slots [a, b) of the children (structure-of-arrays in L, R) of
// k(x1, R_l) - k(x1, L_l) + k(x2, L_l) - k(x2, R_l)
double walk_chunk(const KernelSpec& K, int64_t x1, int64_t x2, const SoAView& L, const SoAView& R,
                  int64_t a, int64_t b) {
    const int64_t rows[2] = {x1, x2};
    double r[2], l[2];
    soa_sums2(K, rows, R, a, b, r);
    soa_sums2(K, rows, L, a, b, l);
    return (r[0] - r[1]) - (l[0] - l[1]);
}

int64_t walk_chunks(int64_t len) { return (len + kChunk - 1) / kChunk; }

// alpha = <psi, k(x1, .) - k(x2, .)> over the first `len` slots, from its per-chunk partials:
// added in chunk order (one chunk: the partial itself)
double walk_total(const double* partial, int64_t nchunks) {
    double s = 0.0;
    for (int64_t c = 0; c < nchunks; ++c) s += partial[c];
    return s;
}

// One kernel halving of in[0..len) into left/right (floor(len/2) each), pair by pair: the walk
// state of Alg. 1a. decide(k, alpha) is the whole per-pair rule; the inner product alpha is
// computed by the caller (serially, or in parallel over the chunks of a step).
struct Halving {
    const KernelSpec& K;
    const int64_t* in;
    int64_t pairs;
    double log_mult;
    std::mt19937_64 gen;
    const double* uniforms;
    int64_t* left;
    int64_t* right;
    SoAPoints L, R;
    double sig2 = 0.0;

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

    double chunk(int64_t k, int64_t c) const {
        return walk_chunk(K, in[2 * k], in[2 * k + 1], L.view(), R.view(), c * kChunk,
                          std::min(k, (c + 1) * kChunk));
    }

    // pairs [k0, k1) of the halving on the calling thread
    void run(int64_t k0, int64_t k1) {
        std::vector<double> partial;
        for (int64_t k = k0; k < k1; ++k) {
            poll_cancel();  // Ctrl-C (cancel.hpp): a serial halving may take seconds
            double alpha = 0.0;
            if (!repeat(k)) {
                const int64_t nc = walk_chunks(k);
                partial.resize(static_cast<size_t>(nc));
                for (int64_t c = 0; c < nc; ++c) partial[static_cast<size_t>(c)] = chunk(k, c);
                alpha = walk_total(partial.data(), nc);
            }
            decide(k, alpha);
            progress_add(k + 1);
        }
    }
};

// The halvings hs[0..) of one round (fewer than the team) run together, pair k of each in step
// k: one region step per pair index, its chunks the walk chunks of every halving (so even one
// halving has a team's worth of chunks once its walk is long), the last arriver adds each
// halving's partials in chunk order and takes its decisions. The team grows with the walk: pairs
// [k0, k1) run on the members their work pays for. While the walks are short (a step would not
// pay for more than H members), each halving runs its first pairs on a member of its own, with
// no barrier at all, and the halvings meet for the rest: the early pairs of a round with several
// halvings do not serialise. A halving's decisions do not depend on which path ran its pairs.
void halve_together(Team& team, std::vector<Halving>& hs) {
    const int64_t H = static_cast<int64_t>(hs.size()), pairs = hs[0].pairs;
    const double entry = entry_ns(hs[0].K.d);
    const int64_t maxc = walk_chunks(pairs);
    std::vector<double> partial(static_cast<size_t>(H * std::max<int64_t>(maxc, 1)));
    auto members_at = [&](int64_t k) {
        return team.members_for(static_cast<double>(4 * H * k) * entry, H * walk_chunks(k));
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
    for (int64_t k0 = first; k0 < pairs;) {
        const int M = members_at(k0);
        int64_t k1 = k0 + 1;
        while (k1 < pairs && members_at(k1) == M) k1 = std::min(pairs, k1 + kChunk);
        team.steps(
            M, k1 - k0, [&](int64_t s) { return H * walk_chunks(k0 + s); },
            [&](int64_t s, int64_t c, int) {
                const int64_t k = k0 + s, nc = walk_chunks(k);
                if (nc == 0) return;
                const int64_t h = c / nc, w = c - h * nc;
                const Halving& hv = hs[static_cast<size_t>(h)];
                if (!hv.repeat(k)) partial[static_cast<size_t>(h * maxc + w)] = hv.chunk(k, w);
            },
            [&](int64_t s) {
                const int64_t k = k0 + s, nc = walk_chunks(k);
                for (int64_t h = 0; h < H; ++h) {
                    Halving& hv = hs[static_cast<size_t>(h)];
                    const double* p = &partial[static_cast<size_t>(h * maxc)];
                    hv.decide(k, hv.repeat(k) ? 0.0 : walk_total(p, nc));
                }
                progress_add(H * (k + 1));
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

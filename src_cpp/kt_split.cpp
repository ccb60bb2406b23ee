#include "kt_split.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cancel.hpp"
#include "parallel.hpp"
#include "soa_kernel.hpp"

namespace sc {

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

constexpr int64_t kChunk = 512;

// alpha = sum_l [k(x1, R_l) - k(x1, L_l) + k(x2, L_l) - k(x2, R_l)] over the first `len` slots
// of the children (stored structure-of-arrays in L, R). Summed in fixed chunks so the value
// does not depend on the number of threads.
double walk_inner(Team* team, const KernelSpec& K, int64_t x1, int64_t x2, const SoAView& L,
                  const SoAView& R, int64_t len, std::vector<double>& partial) {
    auto chunk_sum = [&](int64_t a, int64_t b) {
        return (soa_sum(K, x1, R, a, b) - soa_sum(K, x2, R, a, b)) -
               (soa_sum(K, x1, L, a, b) - soa_sum(K, x2, L, a, b));
    };
    const int64_t nchunks = (len + kChunk - 1) / kChunk;
    if (nchunks <= 1) return len > 0 ? chunk_sum(0, len) : 0.0;
    partial.resize(static_cast<size_t>(nchunks));
    auto body = [&](int64_t c) {
        partial[static_cast<size_t>(c)] = chunk_sum(c * kChunk, std::min(len, (c + 1) * kChunk));
    };
    if (team != nullptr) {
        team->for_chunks(nchunks, body, 4 * len > kParallelWork);
    } else {
        for (int64_t c = 0; c < nchunks; ++c) body(c);
    }
    double s = 0.0;
    for (int64_t c = 0; c < nchunks; ++c) s += partial[static_cast<size_t>(c)];
    return s;
}

// One kernel halving of in[0..len) into left/right (floor(len/2) each); the walk's inner
// products use `team` when given (nullptr: serial, the caller runs halvings in parallel).
void halve(Team* team, const KernelSpec& K, const int64_t* in, int64_t len, double log_mult,
           std::mt19937_64* gen, const double* uniforms, int64_t* left, int64_t* right) {
    const int64_t pairs = len / 2;
    double sig2 = 0.0;
    std::vector<double> partial;
    SoAPoints L(K, pairs), R(K, pairs);
    for (int64_t k = 0; k < pairs; ++k) {
        poll_cancel();
        const int64_t x1 = in[2 * k], x2 = in[2 * k + 1];
        if (x1 == x2) {
            // a repeated point (multiplicity): b = 0, the walk and sigma are unchanged and both
            // children get the point, so the pair costs nothing (its uniform is still drawn)
            if (!uniforms) (*gen)();
            left[k] = right[k] = x1;
            L.set(k, K, x1);
            R.set(k, K, x1);
            continue;
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
        const double alpha = walk_inner(team, K, x1, x2, L.view(), R.view(), k, partial);
        const double prob_x2_left = 0.5 * (1.0 - alpha / thresh);
        const double u = uniforms ? uniforms[k]
                                  : static_cast<double>((*gen)() >> 11) * 0x1.0p-53;
        const bool swap = u <= prob_x2_left;
        left[k] = swap ? x2 : x1;
        right[k] = swap ? x1 : x2;
        L.set(k, K, left[k]);
        R.set(k, K, right[k]);
    }
}

}  // namespace

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
        // enough coresets for every thread: one halving per chunk; otherwise the halvings run
        // in turn, each walk's inner products in parallel
        const bool outer = ncore >= nthreads && nthreads > 1;
        auto one = [&](int64_t l) {
            std::mt19937_64 gen(splitmix64(seed ^ splitmix64((static_cast<uint64_t>(j) << 40) +
                                                             static_cast<uint64_t>(l))));
            const double* u = uniforms ? uniforms + j * row + l * half : nullptr;
            halve(outer ? nullptr : &team, K, cur.data() + l * size, size, log_mult, &gen, u,
                  next.data() + (2 * l) * half, next.data() + (2 * l + 1) * half);
        };
        if (outer) {
            team.for_chunks(ncore, one, size * size > kParallelWork);
        } else {
            for (int64_t l = 0; l < ncore; ++l) one(l);
        }
        cur.swap(next);
        size = half;
    }
    std::copy(cur.begin(), cur.end(), out);
}

}  // namespace sc

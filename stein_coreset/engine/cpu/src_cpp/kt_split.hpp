// KT-SPLIT (Dwivedi & Mackey 2022, Alg. 1a): t rounds of kernel halving with the
// self-balancing Hilbert walk, as used by Kernel Thinning (paper Alg. D.2).
//
// Round j (0-based) halves each of the 2^j coresets of the previous round. Halving a sequence
// (p_0, p_1, ...) takes its pairs (x1, x2) = (p_{2k}, p_{2k+1}) in order and sends one point of
// each pair to the left child, the other to the right, keeping the signed walk
// psi = sum_{right} k(x, .) - sum_{left} k(x, .) small:
//   b^2   = k(x1, x1) + k(x2, x2) - 2 k(x1, x2)
//   alpha = <psi, k(x1, .) - k(x2, .)>
//   a     = max(b sigma sqrt(log_mult_j), b^2),  log_mult_j = 2 log(2 N t / (delta 2^j))
//   sigma^2 += b^2 (1 + (b^2 / a - 2) sigma^2 / a)_+
//   with probability (1 - alpha / a) / 2 the left child gets x2, otherwise x1,
// which is Alg. 1a with delta_i = delta / N (N the input length). O(N^2) kernel evaluations,
// O(N) memory; no kernel matrix is formed.
#pragma once

#include <cstdint>

#include "stein_kernel.hpp"

namespace sc {

// Size of each output coreset: N halved (floor) t times.
int64_t kt_split_size(int64_t N, int t);

// idx: N indices into K (repeats allowed). out: 2^t * kt_split_size(N, t) indices, coreset l at
// out + l * size. Randomness: if `uniforms` is null, coreset l of round j draws from its own
// std::mt19937_64 stream derived from (seed, j, l), so the result does not depend on the number
// of threads; otherwise uniforms[j * (N / 2) + (pairs before coreset l) + k] is used for pair k.
// n_threads: one team for the call. While a round has fewer coresets than threads, its halvings
// run together batch by batch (one region step, one barrier per batch of 32 pair indices; the
// walk's inner products summed in fixed chunks, the team grown with the walk); after that, one
// halving per thread.
void kt_split(const KernelSpec& K, const int64_t* idx, int64_t N, int t, double delta,
              uint64_t seed, const double* uniforms, int64_t* out, int n_threads);

// How kt_split runs a round of `ncore` halvings of 2 half points each on a team of n_threads
// (d: the dimension, for the work estimate): true, the halvings together batch by batch (fewer
// halvings than threads, and work enough for a second member); false, one whole halving per
// member. Never changes a result.
bool kt_split_pairs_together(int n_threads, int64_t ncore, int64_t half, int64_t d);

// The uniforms kt_split draws from `seed` when `uniforms` is null, in the layout of its
// `uniforms` argument (t * (N / 2) values): kt_split(seed) and kt_split(uniforms = these) give
// the same coresets. The CUDA backend draws its uniforms here, so both backends split alike.
void kt_split_uniforms(int64_t N, int t, uint64_t seed, double* out);

// B independent halvings (kt_split with t = 1) of the rows of blocks (B x N, row-major), as
// one round: row l halved as kt_split(K, row l, N, 1, delta, seeds[l]) halves it, its two
// halves at out + (2 l) (N / 2) and out + (2 l + 1) (N / 2). COMPRESS's halvings of a level
// (Alg. F.3) in one call: on a team they run side by side instead of one after another.
void kt_halvings(const KernelSpec& K, const int64_t* blocks, int64_t B, int64_t N, double delta,
                 const uint64_t* seeds, int64_t* out, int n_threads);

}  // namespace sc

// Vectorisable evaluation of k_P between one query point and many points stored in
// structure-of-arrays layout (coordinate c of slot b at U[c * cap + b]). This is sc::eval of
// stein_kernel.hpp reorganised so the loop over points is contiguous and SIMD-friendly; it is
// the inner loop of Stein thinning, KT-SPLIT and KT-Swap.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "stein_kernel.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sc {

// Lets OpenMP shrink its teams while the guard lives (libgomp then uses at most
// "cores - load average" threads), so the many short parallel loops of the greedy algorithms do
// not stall on a busy machine; the caller's setting is restored afterwards.
struct DynamicTeams {
#ifdef _OPENMP
    int saved;
    DynamicTeams() : saved(omp_get_dynamic()) { omp_set_dynamic(1); }
    ~DynamicTeams() { omp_set_dynamic(saved); }
#endif
};

struct SoAPoints {
    int64_t d = 0, cap = 0;
    bool stein = false, centred = false;
    std::vector<double> U, T, mean;

    SoAPoints() = default;
    SoAPoints(const KernelSpec& K, int64_t capacity) { init(K, capacity); }

    void init(const KernelSpec& K, int64_t capacity) {
        d = K.d;
        cap = capacity;
        stein = K.T != nullptr;
        centred = K.mean != nullptr;
        U.assign(static_cast<size_t>(d * cap), 0.0);
        if (stein) T.assign(static_cast<size_t>(d * cap), 0.0);
        if (centred) mean.assign(static_cast<size_t>(cap), 0.0);
    }
    // slot b <- point i of K
    void set(int64_t b, const KernelSpec& K, int64_t i) {
        for (int64_t c = 0; c < d; ++c) U[static_cast<size_t>(c * cap + b)] = K.U[i * d + c];
        if (stein)
            for (int64_t c = 0; c < d; ++c) T[static_cast<size_t>(c * cap + b)] = K.T[i * d + c];
        if (centred) mean[static_cast<size_t>(b)] = K.mean[i];
    }
    // all n points of K in order
    void load_all(const KernelSpec& K) {
        init(K, K.n);
        for (int64_t i = 0; i < K.n; ++i) set(i, K, i);
    }
};

constexpr int64_t kSoABlock = 256;

// out[b - a] = k_P(x_i, slot b) for b in [a, e), e - a <= kSoABlock; i indexes K's points.
void soa_eval(const KernelSpec& K, int64_t i, const SoAPoints& P, int64_t a, int64_t e,
              double* out);

// sum_{b in [a, e)} k_P(x_i, slot b), any length.
double soa_sum(const KernelSpec& K, int64_t i, const SoAPoints& P, int64_t a, int64_t e);

}  // namespace sc

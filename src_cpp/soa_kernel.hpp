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

// Picks the team size once per algorithm call: as many threads as libgomp's dynamic
// adjustment grants now ("cores - load average"), so the many short parallel loops of the greedy
// algorithms neither stall on a busy machine nor query the load at every loop. The caller's
// settings are restored afterwards.
struct DynamicTeams {
#ifdef _OPENMP
    int saved_dyn, saved_max;
    DynamicTeams() : saved_dyn(omp_get_dynamic()), saved_max(omp_get_max_threads()) {
        int nt = 1;
        omp_set_dynamic(1);
#pragma omp parallel
        {
#pragma omp single
            nt = omp_get_num_threads();
        }
        omp_set_dynamic(0);
        omp_set_num_threads(nt);
    }
    ~DynamicTeams() {
        omp_set_num_threads(saved_max);
        omp_set_dynamic(saved_dyn);
    }
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

namespace sc {

// out = K w over all n points of K (K never formed): O(n^2) SIMD-friendly evaluations,
// parallel over rows. The same product as sc::matvec, faster.
void soa_matvec(const KernelSpec& K, const double* w, double* out);

}  // namespace sc

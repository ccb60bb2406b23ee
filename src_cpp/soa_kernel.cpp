#include "soa_kernel.hpp"

#include <algorithm>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
// the block buffers are written up to `len` before being read; GCC cannot see that through the
// vector loads of the AVX-512 path
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace sc {

// The evaluator is built three times — AVX-512 (256-bit vectors, which run faster than 512-bit
// ones for this sqrt/div-bound loop), AVX2+FMA, and the baseline — and the widest one the CPU
// supports is picked at first use.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SC_MULTI_ISA 1
namespace isa_avx512 {
#define SC_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl,avx512dq,avx512bw,prefer-vector-width=256")))
#define SC_RSQRT14 1
#include "soa_kernel_impl.inc"
#undef SC_RSQRT14
#undef SC_TARGET
}  // namespace isa_avx512
namespace isa_avx2 {
#define SC_TARGET __attribute__((target("avx2,fma")))
#include "soa_kernel_impl.inc"
#undef SC_TARGET
}  // namespace isa_avx2
#endif
namespace isa_base {
#define SC_TARGET
#include "soa_kernel_impl.inc"
#undef SC_TARGET
}  // namespace isa_base

namespace {

template <class View>
View view_of(const SoAPoints& P) {
    return View{P.d, P.cap, P.U.data(), P.stein ? P.T.data() : nullptr,
                P.centred ? P.mean.data() : nullptr};
}

using EvalFn = void (*)(const KernelSpec&, int64_t, const SoAPoints&, int64_t, int64_t, double*);

template <class View, void (*F)(const KernelSpec&, int64_t, const View&, int64_t, int64_t,
                                double*)>
void call(const KernelSpec& K, int64_t i, const SoAPoints& P, int64_t a, int64_t e, double* out) {
    const View v = view_of<View>(P);
    F(K, i, v, a, e, out);
}

EvalFn pick() {
#ifdef SC_MULTI_ISA
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return call<isa_avx512::View, isa_avx512::eval_block>;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return call<isa_avx2::View, isa_avx2::eval_block>;
    }
#endif
    return call<isa_base::View, isa_base::eval_block>;
}

}  // namespace

void soa_eval(const KernelSpec& K, int64_t i, const SoAPoints& P, int64_t a, int64_t e,
              double* out) {
    static const EvalFn fn = pick();
    fn(K, i, P, a, e, out);
}

double soa_sum(const KernelSpec& K, int64_t i, const SoAPoints& P, int64_t a, int64_t e) {
    alignas(64) double buf[kSoABlock];
    double s = 0.0;
    for (int64_t b0 = a; b0 < e; b0 += kSoABlock) {
        const int64_t b1 = std::min(e, b0 + kSoABlock);
        soa_eval(K, i, P, b0, b1, buf);
        for (int64_t b = 0; b < b1 - b0; ++b) s += buf[b];
    }
    return s;
}

}  // namespace sc


namespace sc {

void soa_matvec(const KernelSpec& K, const double* w, double* out) {
    DynamicTeams guard;
    SoAPoints P;
    P.load_all(K);
    const int64_t n = K.n;
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; ++i) {
        alignas(64) double buf[kSoABlock];
        double s = 0.0;
        for (int64_t a = 0; a < n; a += kSoABlock) {
            const int64_t e = std::min(n, a + kSoABlock);
            soa_eval(K, i, P, a, e, buf);
            for (int64_t b = 0; b < e - a; ++b) s += buf[b] * w[a + b];
        }
        out[i] = s;
    }
}

}  // namespace sc

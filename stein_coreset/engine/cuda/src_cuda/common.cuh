// What every loop of the `kernels` module of the cuda backend shares: the kernel entry k_P, the
// argmin across a launch and the grid barrier of the persistent loops. The module is this file
// followed by one file per loop (engine/cuda/source.py, MODULES), compiled at run time by NVRTC
// through cupy.RawModule.
//
// The scalar math is engine/shared/base_kernels.inc and engine/shared/radial.inc, the same text
// the C++ compiler builds into _core: engine/cuda/source.py (cuda_source) prepends its NVRTC
// prelude and those files, so no source includes a header (NVRTC has no standard library
// here).
//
// k_P is evaluated as in engine/cpu/src_cpp/soa_kernel_impl.inc: for a query point a and a slot b,
//   q = ||u_a - u_b||^2, tt = <t_a, t_b>, ut = <u_a - u_b, t_a - t_b>,
//   k_P = kappa tt - 2 kappa' ut - 4 q kappa'' - 2 d kappa'    (Stein kernel, Prop. B.5;
//                                                   radial.inc's stein_combination)
//   k_P = kappa                                                   (base kernel)
//   k_P += (mean_all - mean_a) - mean_b                           (centred, footnote 2)
// U, T are the whitened points and scores, (n, d) row-major, float64.
//
// The greedy loops (Stein thinning Alg. D.1, KT-SPLIT Alg. D.2, KT-Swap Alg. D.3) take one
// launch per dependent step and never return to the host inside the loop: each block writes
// its partial argmin, the last block to finish (an atomic counter, after a __threadfence)
// combines them and writes the step's decision to device memory, where the next launch reads
// it. The (value, index) minimum is taken lexicographically, so ties go to the smallest index
// and the result does not depend on the block order. The host captures many steps in one CUDA
// graph and replays it.

#ifndef SC_BLOCK  // threads per block; the CPU simulator of the tests builds smaller blocks
#define SC_BLOCK 256
#endif
#ifndef SC_WARP  // lanes per warp (the simulator builds smaller warps)
#define SC_WARP 32
#endif

struct KP {
    const double* U;
    const double* T;
    const double* mean;
    long long n;
    int d;
    int base;
    int stein;
    int centred;
    double sigma, beta, mean_all;
};

__device__ __forceinline__ KP make_kp(const double* U, const double* T, const double* mean,
                                      long long n, int d, int base, int stein, int centred,
                                      double sigma, double beta, double mean_all) {
    KP K;
    K.U = U; K.T = T; K.mean = mean; K.n = n; K.d = d; K.base = base; K.stein = stein;
    K.centred = centred; K.sigma = sigma; K.beta = beta; K.mean_all = mean_all;
    return K;
}

#define KP_PARAMS                                                                          \
    const double *U, const double *T, const double *mean, long long n, int d, int base,     \
        int stein, int centred, double sigma, double beta, double mean_all
#define KP_ARGS U, T, mean, n, d, base, stein, centred, sigma, beta, mean_all

// (kappa, kappa', q kappa'') of K's base kernel at q (radial.inc); IMQ with beta = -1/2 in the
// form the C++ evaluator's vectorised loop uses, so the two round alike.
__device__ __forceinline__ void radial_any(const KP& K, double q, double& k0, double& k1,
                                           double& qk2) {
    if (K.base == IMQ && K.beta == -0.5) {
        const double s2 = K.sigma * K.sigma, is2 = 1.0 / s2, beta = K.beta;
        imq_half_local(is2, beta * is2, beta * (beta - 1.0) * is2 * is2,
                       beta * (beta - 1.0) * is2, q, k0, k1, qk2);
    } else {
        radial_at(K.base, K.sigma, K.beta, q, k0, k1, qk2);
    }
}

// k_P(x_a, x_b): a the query point, b the slot (the C++ evaluator's orientation).
__device__ __forceinline__ double kp_entry(const KP& K, long long a, long long b) {
    const double* ua = K.U + a * K.d;
    const double* ub = K.U + b * K.d;
    double q = 0.0, tt = 0.0, ut = 0.0;
    if (K.stein) {
        const double* ta = K.T + a * K.d;
        const double* tb = K.T + b * K.d;
        for (int c = 0; c < K.d; ++c) {
            const double du = ua[c] - ub[c];
            q += du * du;
            tt += ta[c] * tb[c];
            ut += du * (ta[c] - tb[c]);
        }
    } else {
        for (int c = 0; c < K.d; ++c) {
            const double du = ua[c] - ub[c];
            q += du * du;
        }
    }
    double k0, k1, qk2;
    radial_any(K, q, k0, k1, qk2);
    double out = K.stein ? stein_combination(k0, k1, qk2, tt, ut, 2.0 * K.d) : k0;
    if (K.centred) out += (K.mean_all - K.mean[a]) - K.mean[b];
    return out;
}

// ---- argmin across a launch -------------------------------------------------------------

struct ArgMin {
    double v;
    long long i;
};

// Whether (v, i) comes before (bv, bi) in the order the argmins take: by value, NaN after every
// number (so a NaN never wins against a number, wherever it sits: in lane 0, in a block's
// partial or as the incumbent), ties, and NaN against NaN, to the smaller index. A total order,
// so any order of the comparisons (warp shuffles, blocks, a grid) gives the same pair. The
// host refuses non-finite inputs before a loop (CudaKernel.check_finite); this keeps a NaN that
// arises inside a loop from taking the pick.
__device__ __forceinline__ bool better(double v, long long i, double bv, long long bi) {
    const bool vnan = v != v, bnan = bv != bv;
    if (vnan != bnan) return bnan;
    if (vnan) return i < bi;
    return v < bv || (v == bv && i < bi);
}

// Lexicographic minimum of (v, i) over the warp, in lane 0 (any order of the comparisons
// gives the same pair: `better` is a total order).
__device__ __forceinline__ void warp_argmin(double& v, long long& i) {
    for (int o = SC_WARP / 2; o > 0; o >>= 1) {
        const double ov = __shfl_down_sync(0xffffffffu, v, o);
        const long long oi = __shfl_down_sync(0xffffffffu, i, o);
        if (better(ov, oi, v, i)) {
            v = ov;
            i = oi;
        }
    }
}

// Lexicographic minimum of (v, i) over the block, in every thread: each warp reduces by
// shuffles, then warp 0 reduces the warps' minima (three __syncthreads a call).
__device__ ArgMin block_argmin(double v, long long i) {
    __shared__ double wv[SC_BLOCK / SC_WARP];
    __shared__ long long wi[SC_BLOCK / SC_WARP];
    __shared__ ArgMin res;
    const int lane = threadIdx.x % SC_WARP, warp = threadIdx.x / SC_WARP;
    warp_argmin(v, i);
    __syncthreads();  // every thread has read the previous call's result
    if (lane == 0) {
        wv[warp] = v;
        wi[warp] = i;
    }
    __syncthreads();
    if (warp == 0) {
        double bv = 1.0 / 0.0;
        long long bi = 0x7fffffffffffffffLL;
        for (int w = lane; w < (int)(blockDim.x / SC_WARP); w += SC_WARP) {
            if (better(wv[w], wi[w], bv, bi)) {
                bv = wv[w];
                bi = wi[w];
            }
        }
        warp_argmin(bv, bi);
        if (lane == 0) {
            res.v = bv;
            res.i = bi;
        }
    }
    __syncthreads();
    return res;
}

// Thread 0 of each block publishes its partial; returns true in every thread of the last
// block to arrive at `counter` (which it resets), after which all partials are visible.
__device__ bool publish_and_check_last(ArgMin mine, double* pval, long long* pidx,
                                       unsigned int* counter, unsigned int nblocks) {
    __shared__ bool last;
    if (threadIdx.x == 0) {
        pval[blockIdx.x] = mine.v;
        pidx[blockIdx.x] = mine.i;
        __threadfence();
        const unsigned int prev = atomicAdd(counter, 1u);
        last = (prev == nblocks - 1);
    }
    __syncthreads();
    if (last) __threadfence();
    return last;
}

// The minimum of the nblocks partials, computed by the whole (last) block; in every thread.
__device__ ArgMin combine_partials(const double* pval, const long long* pidx,
                                   unsigned int nblocks) {
    const volatile double* vv = pval;
    const volatile long long* vi = pidx;
    double bv = 1.0 / 0.0;
    long long bi = 0x7fffffffffffffffLL;
    for (unsigned int b = threadIdx.x; b < nblocks; b += blockDim.x) {
        const double v = vv[b];
        const long long i = vi[b];
        if (better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    return block_argmin(bv, bi);
}

// ---- persistent loops: one launch for many dependent steps -------------------------------
// The grid is at most one block per multiprocessor (all resident at once), and the blocks meet at a
// software grid barrier once per step (the scheme of CUDA's cooperative groups): on one word
// bar[0], block 0 adds 2^31 - (nblocks - 1) and every other block 1, so the top bit flips
// exactly when the last block arrives and the low bits are back at 0; each block waits for
// the flip from the value its own add returned. One atomic per block, no reset, no second
// word, and a block that runs on to the next barrier cannot flip the bit again before the
// slowest has left (the flip needs every block's add). bar[0]'s low 31 bits must be 0 at
// launch (a zeroed word; every launch leaves them so). Each block then combines every
// block's partial argmin itself (the same arithmetic in every block, so all agree on the
// pick), which saves a second barrier.
// Partials are double-buffered by step parity: a block that is a step ahead writes the other
// buffer, and cannot be two steps ahead (it would have to pass a barrier the others have not
// reached). The host launches chunks of steps and waits between them (Ctrl-C, progress).
//
// Every block must be resident for the flip to come: the host launches these kernels
// cooperatively on a grid the occupancy query says fits, one at a time (engine/cuda/launch.py,
// launch_persistent). Should a block still not run (another process's kernels, MPS, a
// debugger), the wait is bounded: a block that has waited SC_BARRIER_BUDGET clock cycles sets
// the error word bar[1], every waiting block sees it and returns false, and the kernel returns
// at once (`if (!grid_barrier(...)) return;` at every call); the host reads bar[1] after the
// launch and raises. The budget, 2^35 cycles (~17 s at 2 GHz), is far above any step's time.
#ifndef SC_BARRIER_BUDGET
#define SC_BARRIER_BUDGET (1LL << 35)
#endif

__device__ bool grid_barrier(unsigned int* bar, unsigned int nblocks) {
    __shared__ int passed;
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned int add = blockIdx.x == 0 ? 0x80000000u - (nblocks - 1u) : 1u;
        __threadfence();
        const unsigned int old = atomicAdd(bar, add);
        const volatile unsigned int* vb = bar;
        const long long start = clock64();
        int ok = 1;
        while (((vb[0] ^ old) & 0x80000000u) == 0u) {
            if (vb[1] != 0u) {  // another block gave up
                ok = 0;
                break;
            }
            if (clock64() - start > SC_BARRIER_BUDGET) {
                atomicExch(bar + 1, 1u);
                ok = 0;
                break;
            }
        }
        __threadfence();
        passed = ok;
    }
    __syncthreads();
    return passed != 0;
}

// KT-SPLIT (Alg. 1a of Dwivedi & Mackey, as engine/cpu/src_cpp/kt_split.cpp).
// Part of the `kernels` module of the cuda backend (engine/cuda/source.py, MODULES):
// compiled after common.cuh, which defines KP, kp_entry, the argmins and grid_barrier.
//
// Pair s of a halving (in[2s], in[2s+1]): the walk's threshold and sigma^2 update (*sig2) and
// the swap decision with inner product alpha and uniform u (kt_split.cpp's Halving::decide).
// *lo goes to the left child, *hi to the right; a repeated point goes to both.
__device__ void kts_decide(const KP& K, const long long* in, long long s, double* sig2,
                           double alpha, double u, double log_mult, long long* lo,
                           long long* hi) {
    const long long x1 = in[2 * s], x2 = in[2 * s + 1];
    *lo = x1;
    *hi = x2;
    if (x1 == x2) return;
    const double b2 = kp_entry(K, x1, x1) + kp_entry(K, x2, x2) - 2.0 * kp_entry(K, x1, x2);
    double sg = *sig2;
    const double prod = sg * b2 * log_mult;
    double thresh = sqrt(prod > 0.0 ? prod : 0.0);
    if (b2 > thresh) thresh = b2;
    if (sg == 0.0) {
        sg = b2 > 0.0 ? b2 : 0.0;
    } else if (thresh != 0.0) {
        const double upd = 1.0 + (b2 / thresh - 2.0) * sg / thresh;
        if (upd > 0.0) sg += b2 * upd;
    }
    *sig2 = sg;
    if (!(thresh > 0.0)) thresh = 1.0;
    if (u <= 0.5 * (1.0 - alpha / thresh)) {
        *lo = x2;
        *hi = x1;
    }
}

// One round halves `ncore` coresets of `size` points (cur[l * size ..]) into next (left child
// of l at (2 l) * half, right at (2 l + 1) * half, half = size / 2). Pair k of coreset l is
// (cur[2k], cur[2k+1]); its walk inner product alpha_k = sum_{p<k} [k(x1, R_p) - k(x1, L_p)
// + k(x2, L_p) - k(x2, R_p)] is accumulated in acc[l * half + k] as the decisions are made:
// launch s adds the terms of decision s - 1 to every later pair (grid.y = coreset), then the
// last block of each coreset decides pair s. kst[l] = the next pair to decide; sig2[l] the
// walk's running variance; counters[l] the per-coreset block counter. A round is `half`
// launches (more are no-ops).
extern "C" __global__ void kts_step(KP_PARAMS, const long long* cur, long long size,
                                    long long* next, double* acc, double* sig2,
                                    const double* unif, long long* kst,
                                    unsigned int* counters, double log_mult) {
    const long long l = blockIdx.y;
    const long long half = size / 2;
    const long long s = kst[l];
    if (s >= half) return;
    const KP K = make_kp(KP_ARGS);
    const long long* in = cur + l * size;
    long long* left = next + (2 * l) * half;
    long long* right = next + (2 * l + 1) * half;
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= 1 && p >= s && p < half) {
        const long long Lp = left[s - 1], Rp = right[s - 1];
        const long long x1 = in[2 * p], x2 = in[2 * p + 1];
        acc[l * half + p] += (kp_entry(K, x1, Rp) - kp_entry(K, x2, Rp)) -
                             (kp_entry(K, x1, Lp) - kp_entry(K, x2, Lp));
    }
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        const unsigned int prev = atomicAdd(counters + l, 1u);
        last = (prev == gridDim.x - 1);
    }
    __syncthreads();
    if (!last || threadIdx.x != 0) return;
    __threadfence();
    {
        long long lo, hi;
        kts_decide(K, in, s, sig2 + l, ((volatile double*)acc)[l * half + s],
                   unif[l * half + s], log_mult, &lo, &hi);
        left[s] = lo;
        right[s] = hi;
    }
    kst[l] = s + 1;
    counters[l] = 0u;
}

#define KTS_MAX_CORESETS 1024

// KT-SPLIT round steps s0 .. s1-1 (state[0] = s0 on entry) as one persistent launch: the same
// halving as kts_step. Per step: every block adds decision s-1's walk terms to its share of
// the later pairs of every coreset (grid-stride over ncore * (half - s) items), one grid
// barrier, then every block decides pair s of every coreset itself (the same arithmetic on the
// same values, so all blocks agree; each keeps its own copy of the walks' sigma^2 in
// sig2b[blockIdx.x * ncore + l]) and block 0 writes the decisions to next.
extern "C" __global__ void kts_persistent(KP_PARAMS, const long long* cur, long long size,
                                          long long ncore, long long* next, double* acc,
                                          double* sig2b, const double* unif, long long* state,
                                          unsigned int* bar, double log_mult, long long s1) {
    const KP K = make_kp(KP_ARGS);
    __shared__ long long decL[KTS_MAX_CORESETS], decR[KTS_MAX_CORESETS];
    const long long half = size / 2;
    const long long s0 = state[0];
    if (s0 >= 1) {
        for (long long l = threadIdx.x; l < ncore; l += blockDim.x) {
            decL[l] = next[(2 * l) * half + s0 - 1];
            decR[l] = next[(2 * l + 1) * half + s0 - 1];
        }
    }
    __syncthreads();
    const unsigned int nb = gridDim.x;
    const long long stride = (long long)nb * blockDim.x;
    double* sig2 = sig2b + (long long)blockIdx.x * ncore;
    const long long end = s1 < half ? s1 : half;
    for (long long s = s0; s < end; ++s) {
        if (s >= 1) {
            const long long rest = half - s;
            for (long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x; f < ncore * rest;
                 f += stride) {
                const long long l = f / rest, p = s + (f - l * rest);
                const long long* in = cur + l * size;
                const long long x1 = in[2 * p], x2 = in[2 * p + 1];
                const long long Lp = decL[l], Rp = decR[l];
                acc[l * half + p] += (kp_entry(K, x1, Rp) - kp_entry(K, x2, Rp)) -
                                     (kp_entry(K, x1, Lp) - kp_entry(K, x2, Lp));
            }
        }
        if (!grid_barrier(bar, nb)) return;
        for (long long l = threadIdx.x; l < ncore; l += blockDim.x) {
            const long long* in = cur + l * size;
            long long lo, hi;
            kts_decide(K, in, s, sig2 + l, ((volatile double*)acc)[l * half + s],
                       unif[l * half + s], log_mult, &lo, &hi);
            decL[l] = lo;
            decR[l] = hi;
            if (blockIdx.x == 0) {
                next[(2 * l) * half + s] = lo;
                next[(2 * l + 1) * half + s] = hi;
            }
        }
        __syncthreads();
    }
    if (blockIdx.x == 0 && threadIdx.x == 0 && end > s0) state[0] = end;
}

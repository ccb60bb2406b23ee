// CUDA kernels of the `cuda` backend, compiled at run time by NVRTC through cupy.RawModule.
//
// The scalar math is src_cpp/base_kernels.inc and src_cpp/radial.inc, the same text the C++
// compiler builds into _core: stein_coreset/_cuda/__init__.py (cuda_source) prepends its NVRTC
// prelude and those files, so this source never includes a header (NVRTC has no standard
// library here).
//
// k_P is evaluated as in src_cpp/soa_kernel_impl.inc: for a query point a and a slot b,
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

// ---- dense evaluations -------------------------------------------------------------------

// out[a * nc + b] = k_P(rows[a], cols[b]); cols == all columns when all_cols.
extern "C" __global__ void kp_gram(KP_PARAMS, const long long* rows, long long nr,
                                   const long long* cols, long long nc, int all_cols,
                                   double* out) {
    const KP K = make_kp(KP_ARGS);
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= nr * nc) return;
    const long long a = e / nc, b = e - a * nc;
    const long long j = all_cols ? b : cols[b];
    out[a * nc + b] = kp_entry(K, rows[a], j);
}

// out[i] = k_P(x_i, x_i).
extern "C" __global__ void kp_diag(KP_PARAMS, double* out) {
    const KP K = make_kp(KP_ARGS);
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = kp_entry(K, i, i);
}

// partial[c * n + i] = sum_{j in chunk c} k_P(x_i, x_j) w_j (chunks of `chunk` columns); the
// chunks are then added in order by sum_rows, so the product is deterministic.
extern "C" __global__ void kp_matvec_partial(KP_PARAMS, const double* w, long long chunk,
                                             double* partial) {
    const KP K = make_kp(KP_ARGS);
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long c = blockIdx.y;
    if (i >= n) return;
    const long long j0 = c * chunk;
    const long long j1 = j0 + chunk < n ? j0 + chunk : n;
    double s = 0.0;
    for (long long j = j0; j < j1; ++j) s += kp_entry(K, i, j) * w[j];
    partial[c * n + i] = s;
}

// out[i] = sum_{c < nparts} partial[c * n + i], in order.
extern "C" __global__ void sum_rows(const double* partial, long long nparts, long long n,
                                    double* out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double s = 0.0;
    for (long long c = 0; c < nparts; ++c) s += partial[c * n + i];
    out[i] = s;
}

// out[i] = sum_{a < m} k_P(x_i, x_{I_a}) (KT-Swap's sufficient statistic g).
extern "C" __global__ void kp_index_sum(KP_PARAMS, const long long* I, long long m,
                                        double* out) {
    const KP K = make_kp(KP_ARGS);
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double s = 0.0;
    for (long long a = 0; a < m; ++a) s += kp_entry(K, i, I[a]);
    out[i] = s;
}

// ---- Stein thinning (Alg. D.1) -------------------------------------------------------------
// state[0] = steps done t, state[1] = the last pick (-1 before the first). Step t adds
// 2 k_P(x_{j_{t-1}}, .) to the running score (which starts at the diagonal) and picks its
// first argmin: j_t = argmin_i { k_P(x_i, x_i) + 2 sum_{s<t} k_P(x_i, x_{j_s}) }.
extern "C" __global__ void st_step(KP_PARAMS, double* score, double* pval, long long* pidx,
                                   long long* state, unsigned int* counter, long long* out,
                                   long long m) {
    const long long t = state[0];
    if (t >= m) return;
    const KP K = make_kp(KP_ARGS);
    const long long j = state[1];
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double v = 1.0 / 0.0;
    long long vi = 0x7fffffffffffffffLL;
    if (i < n) {
        double s = score[i];
        if (j >= 0) {
            s += 2.0 * kp_entry(K, j, i);
            score[i] = s;
        }
        v = s;
        vi = i;
    }
    const ArgMin mine = block_argmin(v, vi);
    if (!publish_and_check_last(mine, pval, pidx, counter, gridDim.x)) return;
    const ArgMin best = combine_partials(pval, pidx, gridDim.x);
    if (threadIdx.x == 0) {
        const long long pick = best.i < n ? best.i : 0;
        out[t] = pick;
        state[1] = pick;
        state[0] = t + 1;
        *counter = 0u;
    }
}

// ---- KT-SPLIT (Alg. 1a of Dwivedi & Mackey, as in src_cpp/kt_split.cpp) --------------------
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

// ---- KT-Swap targeting P (Alg. D.3, as in src_cpp/kt_swap.cpp) -----------------------------
// g = sum_a k_P(x_{I_a}, .), dg the diagonal. Launch s works on a = s mod m in pass s / m:
// first it completes swap s - 1 (g += k_P(x_new, .), where x_new is the old point when it
// was kept), then removes x_{I_a} (g -= k_P(x_{I_a}, .), kept in col) and picks
// argmin_i 2 g_i + dg_i; the point is replaced only when that is strictly below the current
// point's value. state: [0] s, [1] the point added back by the next launch (-1: none),
// [2] swaps in this pass, [3] total swaps, [4] done (a pass without a swap ends the loop).
extern "C" __global__ void kts_swap_step(KP_PARAMS, double* g, const double* dg, double* col,
                                         long long* I, long long m, long long passes,
                                         double* pval, long long* pidx, long long* state,
                                         unsigned int* counter) {
    if (state[4]) return;
    const long long s = state[0];
    if (s >= m * passes) return;
    const KP K = make_kp(KP_ARGS);
    const long long add = state[1];
    const long long a = s % m;
    const long long cur = I[a];
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double v = 1.0 / 0.0;
    long long vi = 0x7fffffffffffffffLL;
    if (i < n) {
        double gi = g[i];
        if (add >= 0) gi += kp_entry(K, add, i);
        const double c = kp_entry(K, cur, i);
        gi -= c;
        g[i] = gi;
        col[i] = c;
        v = 2.0 * gi + dg[i];
        vi = i;
    }
    const ArgMin mine = block_argmin(v, vi);
    if (!publish_and_check_last(mine, pval, pidx, counter, gridDim.x)) return;
    const ArgMin best = combine_partials(pval, pidx, gridDim.x);
    if (threadIdx.x == 0) {
        const double cur_v = 2.0 * ((volatile double*)g)[cur] + dg[cur];
        long long pick = best.i < n ? best.i : cur;
        if (!(best.v < cur_v)) pick = cur;
        if (pick != cur) {
            I[a] = pick;
            state[2] += 1;
            state[3] += 1;
        }
        state[1] = pick;
        if (a == m - 1) {
            if (state[2] == 0) state[4] = 1;
            state[2] = 0;
        }
        state[0] = s + 1;
        *counter = 0u;
    }
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
// cooperatively on a grid the occupancy query says fits, one at a time (stein_coreset/_cuda,
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

// Stein thinning steps t0 .. t1-1 (state[0] = t0 on entry, state[1] = the last pick); the
// same picks as st_step. bar[0] is the grid barrier's word (low 31 bits 0), bar[1] its error
// word (0).
extern "C" __global__ void st_persistent(KP_PARAMS, double* score, double* pval,
                                         long long* pidx, long long* state, unsigned int* bar,
                                         long long* out, long long t1) {
    const KP K = make_kp(KP_ARGS);
    __syncthreads();
    const unsigned int nb = gridDim.x;
    const long long stride = (long long)nb * blockDim.x;
    long long j = state[1];
    const long long t0 = state[0];
    for (long long t = t0; t < t1; ++t) {
        double v = 1.0 / 0.0;
        long long vi = 0x7fffffffffffffffLL;
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
            double s = score[i];
            if (j >= 0) {
                s += 2.0 * kp_entry(K, j, i);
                score[i] = s;
            }
            if (better(s, i, v, vi)) {
                v = s;
                vi = i;
            }
        }
        const ArgMin mine = block_argmin(v, vi);
        const long long buf = (t & 1) * nb;
        if (threadIdx.x == 0) {
            pval[buf + blockIdx.x] = mine.v;
            pidx[buf + blockIdx.x] = mine.i;
        }
        if (!grid_barrier(bar, nb)) return;
        const ArgMin best = combine_partials(pval + buf, pidx + buf, nb);
        j = best.i < n ? best.i : 0;
        if (blockIdx.x == 0 && threadIdx.x == 0) out[t] = j;
    }
    // every block has read state[] before the first barrier; block 0 records the end state
    if (blockIdx.x == 0 && threadIdx.x == 0 && t1 > t0) {
        state[0] = t1;
        state[1] = j;
    }
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

// ---- KT-Swap-LS (Alg. G.2, as src_cpp/kt_swap_ls.cpp) -------------------------------------
// g = K w for the dense weights w with support supp (ascending), each g_j summed over the
// support in order, as the C++ does.
extern "C" __global__ void ksls_init(KP_PARAMS, const long long* supp, const double* wsupp,
                                     long long ns, double* g) {
    const KP K = make_kp(KP_ARGS);
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    double s = 0.0;
    for (long long a = 0; a < ns; ++a) s += wsupp[a] * kp_entry(K, supp[a], j);
    g[j] = s;
}

// Steps s0 .. s1-1 of the swaps as one persistent launch (one block per multiprocessor, all
// resident). Step s visits i = order[s]: every block computes the new D after removing i (the
// same arithmetic on the same values), its threads the column k_P(x_i, .), the renormalised
// statistic g2 and each candidate's line search, and the blocks' first argmin of D_j; one grid
// barrier, and every block combines the partials itself. Only a strict improvement is taken:
// then w <- (1 - t) w / (1 - w_i) + t e_k with w_i = 0, g <- (1 - t) g2 + t k_P(x_k, .), and a
// second barrier. A thread owns the same indices j in every step, so its g_j and w_j need no
// barrier of their own. dstate[0] carries D between launches; pval / pidx hold 2 nb partials.
extern "C" __global__ void ksls_persistent(KP_PARAMS, double* w, double* g, double* g2,
                                           const double* kd, const long long* order,
                                           long long s0, long long s1, int splx,
                                           double* dstate, double* pval, long long* pidx,
                                           unsigned int* bar) {
    const KP K = make_kp(KP_ARGS);
    __syncthreads();
    const unsigned int nb = gridDim.x;
    const long long stride = (long long)nb * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const volatile double* vw = w;
    const volatile double* vg = g;
    const volatile double* vg2 = g2;
    double D = dstate[0];
    long long searches = 0;
    for (long long s = s0; s < s1; ++s) {
        const long long i = order[s];
        const double wi = vw[i];
        if (wi == 0.0 || fabs(1.0 - wi) < 1e-9) continue;
        const double D_old = D;
        const double sc = 1.0 / (1.0 - wi);
        D = (D - 2.0 * wi * vg[i] + wi * wi * kd[i]) * sc * sc;
        const double Dn = D;
        double bv = 1.0 / 0.0;
        long long bi = 0x7fffffffffffffffLL;
        for (long long j = first; j < n; j += stride) {
            const double gj = (g[j] - wi * kp_entry(K, i, j)) * sc;
            g2[j] = gj;
            double t;
            const double Dj = swap_ls_line(Dn, gj, kd[j], splx, &t);
            if (better(Dj, j, bv, bi)) {
                bv = Dj;
                bi = j;
            }
        }
        const ArgMin mine = block_argmin(bv, bi);
        // partials double-buffered by the parity of the searches: after a search that keeps
        // the old state, a block may publish the next one while another still combines
        const long long buf = (searches++ & 1) * nb;
        if (threadIdx.x == 0) {
            pval[buf + blockIdx.x] = mine.v;
            pidx[buf + blockIdx.x] = mine.i;
        }
        if (!grid_barrier(bar, nb)) return;
        const ArgMin best = combine_partials(pval + buf, pidx + buf, nb);
        __shared__ double sbest;
        __shared__ long long skbest;
        if (threadIdx.x == 0) {
            sbest = best.v;
            skbest = best.i;
        }
        __syncthreads();
        const long long kb = skbest;
        const double Dbest = sbest;
        if (kb >= n || !(Dbest < D_old)) {  // no strict improvement: the old state, exactly
            D = D_old;
            continue;
        }
        double t;
        swap_ls_line(Dn, vg2[kb], kd[kb], splx, &t);
        const double keep = 1.0 - t;
        for (long long j = first; j < n; j += stride) {
            w[j] = swap_ls_weight(w[j], j, i, sc, kb, t);
            g[j] = keep * g2[j] + t * kp_entry(K, kb, j);
        }
        D = Dbest;
        if (!grid_barrier(bar, nb)) return;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) dstate[0] = D;
}

// ---- AMD on K' = F F^T + diag(res) (Alg. F.2, the steps of src_cpp/amd.cpp) ---------------
// One persistent launch runs steps s0 .. s1-1 of a call of `steps` steps (t = t0 + 1 + s).
// A warp owns rows gw, gw + GW, ... (gw its index in the grid, GW the warps in the grid) and
// takes them SC_WARP at a time: lane l loads the scalars of the batch's row l (w, v, log v,
// res: one coalesced load each, the normalisation's exp in parallel), then the warp runs the
// batch's rows one by one with its lanes over the columns of F (lane l holds k = l + j
// SC_WARP, j < KPL): the row's dot with u = F^T z_t, its log-domain mirror update, and the
// online-max sum of e_i F_i, with F's row read once (the next row's loads issued before the
// current row's arithmetic where registers allow, KPL <= 16). Only a row's own lane writes
// its scalars. Warps' partials are merged by their block in warp order, then every block
// merges all blocks' partials in block order after one grid barrier (the same arithmetic in
// every block, so all hold the same F^T w, F^T v in shared memory): a step costs one grid
// barrier, and the result depends on the grid shape only (fixed for a device), not on
// timing. Partials are double-buffered by parity. The first launch (s0 = 0) also computes
// log v, F^T w and F^T v; the last (s1 = steps) applies the last step's normalisation.
// Between launches, block 0 leaves F^T w, F^T v in Ftw, Ftv and (beta, log-normaliser) of the
// last step in st.
#define AMD_MAX_KPL 32
#define AMD_MAX_R (AMD_MAX_KPL * SC_WARP)

// The sum of x over the warp, added in a fixed tree order, in every lane.
__device__ __forceinline__ double warp_sum(double x) {
    for (int o = SC_WARP / 2; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
    return __shfl_sync(0xffffffffu, x, 0);
}

__device__ __forceinline__ double amd_beta(long long t) { return 2.0 / (double)(t + 1); }

// this lane's columns of row i of F (zeros past r)
template <int KPL>
__device__ __forceinline__ void amd_load_row(const float* F, long long i, int r, int lane,
                                             float* f) {
    const float* Fi = F + i * r;
    for (int j = 0; j < KPL; ++j) {
        const int k = lane + j * SC_WARP;
        f[j] = k < r ? Fi[k] : 0.0f;
    }
}

template <int KPL>
__device__ void amd_lowrank_run(const float* F, const double* res, long long n, int r,
                                double* w, double* v, double* logv, double* Ftw, double* Ftv,
                                double* part, double* wpart, double* st, unsigned int* bar,
                                long long t0, long long s0, long long s1, long long steps,
                                double eta) {
    // registers: at KPL = 32, u stays in shared memory and the next row is not prefetched
    constexpr bool prefetch = KPL <= 16, ureg = KPL <= 16;
    const double ninf = -1.0 / 0.0;
    __shared__ double sftw[AMD_MAX_R], sftv[AMD_MAX_R], su[AMD_MAX_R];
    const int lane = threadIdx.x % SC_WARP, warp = threadIdx.x / SC_WARP;
    const int wpb = blockDim.x / SC_WARP;
    const unsigned int nb = gridDim.x;
    const long long gw = (long long)blockIdx.x * wpb + warp, GW = (long long)nb * wpb;
    const long long batch = (long long)SC_WARP * GW;  // rows a batch of the grid covers
    const long long P = 2 * (long long)r + 2;  // a partial: max, sum, r (or 2 r) sums
    double* wp = wpart + gw * P;
    double pb = st[0], pl = st[1];  // the previous step's beta and log-normaliser
    float fk[KPL], fn[KPL];
    if (s0 == 0) {
        double a[KPL], b[KPL];
        for (int j = 0; j < KPL; ++j) a[j] = b[j] = 0.0;
        for (long long b0 = gw; b0 < n; b0 += batch) {
            const long long i = b0 + lane * GW;
            double wi = 0.0, vi = 0.0;
            if (i < n) {
                wi = w[i];
                vi = v[i];
                logv[i] = vi > 0.0 ? log(vi) : ninf;
            }
            for (int q = 0; q < SC_WARP; ++q) {
                const long long iq = b0 + q * GW;
                if (iq >= n) break;
                const double wq = __shfl_sync(0xffffffffu, wi, q);
                const double vq = __shfl_sync(0xffffffffu, vi, q);
                if (wq == 0.0 && vq == 0.0) continue;
                amd_load_row<KPL>(F, iq, r, lane, fk);
                for (int j = 0; j < KPL; ++j) {
                    a[j] += wq * (double)fk[j];
                    b[j] += vq * (double)fk[j];
                }
            }
        }
        for (int j = 0; j < KPL; ++j) {
            const int k = lane + j * SC_WARP;
            if (k < r) {
                wp[2 + k] = a[j];
                wp[2 + r + k] = b[j];
            }
        }
        __syncthreads();
        double* bp = part + (long long)blockIdx.x * P;  // buffer 0
        for (int k = threadIdx.x; k < 2 * r; k += blockDim.x) {
            double sum = 0.0;
            for (int q = 0; q < wpb; ++q)
                sum += wpart[((long long)blockIdx.x * wpb + q) * P + 2 + k];
            bp[2 + k] = sum;
        }
        if (!grid_barrier(bar, nb)) return;
        const volatile double* vp = part;
        for (int k = threadIdx.x; k < r; k += blockDim.x) {
            double sa = 0.0, sb = 0.0;
            for (unsigned int q = 0; q < nb; ++q) {
                sa += vp[q * P + 2 + k];
                sb += vp[q * P + 2 + r + k];
            }
            sftw[k] = sa;
            sftv[k] = sb;
        }
    } else {
        for (int k = threadIdx.x; k < r; k += blockDim.x) {
            sftw[k] = Ftw[k];
            sftv[k] = Ftv[k];
        }
    }
    __syncthreads();
    for (long long s = s0; s < s1; ++s) {
        const long long t = t0 + 1 + s;
        const double beta = amd_beta(t), cst = 2.0 * (double)t * eta;
        for (int k = threadIdx.x; k < KPL * SC_WARP; k += blockDim.x)
            su[k] = k < r ? (1.0 - beta) * sftw[k] + beta * sftv[k] : 0.0;
        __syncthreads();
        double ul[ureg ? KPL : 1], a[KPL];
        for (int j = 0; j < KPL; ++j) {
            if constexpr (ureg) ul[j] = su[lane + j * SC_WARP];
            a[j] = 0.0;
        }
        double Mw = ninf, sw = 0.0;
        for (long long b0 = gw; b0 < n; b0 += batch) {
            // this lane's row of the batch: the end of step s - 1 on it, then z_i and res_i z_i
            const long long i = b0 + lane * GW;
            double lg = ninf, qi = 0.0;
            if (i < n) {
                lg = logv[i];
                double wi = w[i], vi = v[i];
                if (s > 0) {
                    if (lg == ninf) {
                        wi *= 1.0 - pb;
                    } else {
                        lg -= pl;
                        vi = exp(lg);
                        wi = (1.0 - pb) * wi + pb * vi;
                        logv[i] = lg;
                        v[i] = vi;
                    }
                    w[i] = wi;
                }
                qi = res[i] * ((1.0 - beta) * wi + beta * vi);
            }
            const long long left = (n - b0 + GW - 1) / GW;  // this warp's rows from b0 on
            const int rows = left < SC_WARP ? (int)left : SC_WARP;
            double mine = ninf;  // this lane's row's new log v
            if constexpr (prefetch) amd_load_row<KPL>(F, b0, r, lane, fn);
            for (int q = 0; q < rows; ++q) {
                const long long iq = b0 + q * GW;
                if constexpr (prefetch) {
                    for (int j = 0; j < KPL; ++j) fk[j] = fn[j];
                    if (q + 1 < rows) amd_load_row<KPL>(F, iq + GW, r, lane, fn);
                }
                const double lq = __shfl_sync(0xffffffffu, lg, q);
                const double rq = __shfl_sync(0xffffffffu, qi, q);
                if (lq == ninf) continue;  // off the support
                if constexpr (!prefetch) amd_load_row<KPL>(F, iq, r, lane, fk);
                double g = 0.0;
                for (int j = 0; j < KPL; ++j) {
                    if constexpr (ureg) g += (double)fk[j] * ul[j];
                    else g += (double)fk[j] * su[lane + j * SC_WARP];
                }
                g = warp_sum(g);
                const double lv = lq - cst * (g + rq);
                if (lane == q) mine = lv;
                if (lv > Mw) {
                    const double f = exp(Mw - lv);
                    sw *= f;
                    for (int j = 0; j < KPL; ++j) a[j] *= f;
                    Mw = lv;
                }
                const double e = exp(lv - Mw);
                sw += e;
                for (int j = 0; j < KPL; ++j) a[j] += e * (double)fk[j];
            }
            if (i < n && lg != ninf) logv[i] = mine;
        }
        if (lane == 0) {
            wp[0] = Mw;
            wp[1] = sw;
        }
        for (int j = 0; j < KPL; ++j) {
            const int k = lane + j * SC_WARP;
            if (k < r) wp[2 + k] = a[j];
        }
        __syncthreads();
        const long long buf = ((s + 1) & 1) * (long long)nb * P;
        {
            const double* wb = wpart + (long long)blockIdx.x * wpb * P;
            double Mb = ninf;
            for (int q = 0; q < wpb; ++q) Mb = wb[q * P] > Mb ? wb[q * P] : Mb;
            double* bp = part + buf + (long long)blockIdx.x * P;
            for (int k = threadIdx.x; k < r + 1; k += blockDim.x) {  // k = r: the sum
                double s2 = 0.0;
                for (int q = 0; q < wpb; ++q) {
                    if (wb[q * P] == ninf) continue;
                    const double f = exp(wb[q * P] - Mb);
                    s2 += f * (k < r ? wb[q * P + 2 + k] : wb[q * P + 1]);
                }
                if (k < r) bp[2 + k] = s2; else bp[1] = s2;
            }
            if (threadIdx.x == 0) bp[0] = Mb;
        }
        if (!grid_barrier(bar, nb)) return;
        const volatile double* vp = part + buf;
        double M = ninf;
        for (unsigned int q = 0; q < nb; ++q) M = vp[q * P] > M ? vp[q * P] : M;
        double sum = 0.0;
        for (unsigned int q = 0; q < nb; ++q)
            if (vp[q * P] != ninf) sum += exp(vp[q * P] - M) * vp[q * P + 1];
        for (int k = threadIdx.x; k < r; k += blockDim.x) {
            double acc = 0.0;
            for (unsigned int q = 0; q < nb; ++q)
                if (vp[q * P] != ninf) acc += exp(vp[q * P] - M) * vp[q * P + 2 + k];
            const double ftv = acc / sum;
            sftv[k] = ftv;
            sftw[k] = (1.0 - beta) * sftw[k] + beta * ftv;
        }
        pb = beta;
        pl = M + log(sum);
        __syncthreads();
    }
    if (s1 == steps && s1 > s0) {  // the last step's normalisation, a thread per row
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += (long long)nb * blockDim.x) {
            const double lg = logv[i];
            if (lg == ninf) {
                w[i] *= 1.0 - pb;
            } else {
                const double vi = exp(lg - pl);
                v[i] = vi;
                w[i] = (1.0 - pb) * w[i] + pb * vi;
            }
        }
    }
    if (blockIdx.x == 0) {
        for (int k = threadIdx.x; k < r; k += blockDim.x) {
            Ftw[k] = sftw[k];
            Ftv[k] = sftv[k];
        }
        if (threadIdx.x == 0) {
            st[0] = pb;
            st[1] = pl;
        }
    }
}

#define AMD_LOWRANK_ENTRY(KPL)                                                                \
    extern "C" __global__ void amd_lowrank_k##KPL(                                            \
        const float* F, const double* res, long long n, int r, double* w, double* v,          \
        double* logv, double* Ftw, double* Ftv, double* part, double* wpart, double* st,      \
        unsigned int* bar, long long t0, long long s0, long long s1, long long steps,         \
        double eta) {                                                                         \
        amd_lowrank_run<KPL>(F, res, n, r, w, v, logv, Ftw, Ftv, part, wpart, st, bar, t0,    \
                             s0, s1, steps, eta);                                             \
    }
AMD_LOWRANK_ENTRY(1)
AMD_LOWRANK_ENTRY(2)
AMD_LOWRANK_ENTRY(4)
AMD_LOWRANK_ENTRY(8)
AMD_LOWRANK_ENTRY(16)
AMD_LOWRANK_ENTRY(32)

// ---- weighted RPCholesky (Alg. F.1, the steps of src_cpp/rpcholesky.cpp) -----------------
// One persistent launch runs steps i0 .. i1-1 on diag(sw) K diag(sw): the state is the
// residual diagonal (res), F^T (rank rows of n) and the pivots, in device memory. Block b owns a
// contiguous run of tiles (SC_BLOCK consecutive indices each; thread t computes entry t of a
// tile, so the loads of F^T's rows coalesce). A step: every block sums the partial sums of d
// (one per block, a fixed order, so all blocks agree on sum(d) and on whether to stop) and
// finds the block whose run holds the pivot, the first s with cumsum(d)_s > u_i sum(d); that
// block walks its tiles' sums and scans the tile to find s (one grid barrier after it); then
// every block computes the pivot's residual g_s = K'_ss - sum_k F_sk^2 sequentially (the
// C++'s order, so all agree on it and on stopping), its tiles of the column
// g = K'_{:s} - F_{:, <i} F_{s, <i}^T (the C++'s order of terms, so the factors differ by
// the kernel entries' last bits only), the new row
// of F^T, d <- max(d - f^2, 0) with d_s = 0, and its tiles' sums of the new d for the next
// step (one grid barrier before it). state = {the step it stopped at, the last pivot}.
#define WRPC_MAX_RANK 4096

// the sum of x over the block in a fixed tree order, in every thread: sb[t] += sb[t + o] for
// o = blockDim/2, ..., 1, the levels below a warp by shuffles (the same additions in the same
// order, so the same bits, with fewer __syncthreads)
__device__ double block_sum(double x) {
    __shared__ double sb[SC_BLOCK];
    __syncthreads();  // every thread has read the previous call's result
    sb[threadIdx.x] = x;
    __syncthreads();
    for (int o = blockDim.x / 2; o >= SC_WARP; o >>= 1) {
        if (threadIdx.x < o) sb[threadIdx.x] += sb[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x < SC_WARP) {
        double y = sb[threadIdx.x];
        for (int o = SC_WARP / 2; o > 0; o >>= 1) y += __shfl_down_sync(0xffffffffu, y, o);
        if (threadIdx.x == 0) sb[0] = y;
    }
    __syncthreads();
    return sb[0];
}

extern "C" __global__ void wrpc_persistent(KP_PARAMS, const double* sw, double* res, double* Ft,
                                           long long* pivots, long long i0, long long i1,
                                           const double* u, double tol, double* tsum,
                                           double* part, long long* state, unsigned int* bar) {
    const KP K = make_kp(KP_ARGS);
    __shared__ double Fs[WRPC_MAX_RANK], scan[SC_BLOCK];
    __shared__ long long tile_hit, lastpos;
    __shared__ double tile_pre;
    const int tid = threadIdx.x;
    const unsigned int nb = gridDim.x;
    const long long B = blockDim.x;
    const long long tiles = (n + B - 1) / B, per = (tiles + nb - 1) / nb;
    const long long c0 = (long long)blockIdx.x * per;
    const long long c1 = c0 + per < tiles ? c0 + per : tiles;
    const volatile double* vpart = part;
    {  // the partial sums of d at entry
        double acc = 0.0;
        for (long long c = c0; c < c1; ++c) {
            const long long j = c * B + tid;
            const double ts = block_sum(j < n ? res[j] : 0.0);
            if (tid == 0) {
                tsum[c] = ts;
                acc += ts;
            }
        }
        if (tid == 0) part[blockIdx.x] = acc;
    }
    long long stop = i1, s = -1;
    for (long long i = i0; i < i1; ++i) {
        if (!grid_barrier(bar, nb)) return;
        double total = 0.0;
        for (unsigned int b = 0; b < nb; ++b) total += vpart[b];
        if (!(total > tol)) {
            stop = i;
            break;
        }
        const double target = total * u[i - i0];
        double pre = 0.0;
        unsigned int hit = nb;  // nb: no block (target rounded to sum(d)): s = n - 1
        for (unsigned int b = 0; b < nb; ++b) {
            const double pb = vpart[b];
            if (pre + pb > target) {
                hit = b;
                break;
            }
            pre += pb;
        }
        if (hit == nb && blockIdx.x == 0 && tid == 0) state[1] = n - 1;
        if (blockIdx.x == hit) {
            if (tid == 0) {  // the tile: the first whose running sum passes the target, or
                double a = pre;  // (rounding) the last with a positive sum
                long long hitc = -1, lastc = -1;
                double alast = pre, arun = pre;
                for (long long c = c0; c < c1; ++c) {
                    const double ts = tsum[c];
                    if (a + ts > target) {
                        hitc = c;
                        break;
                    }
                    if (ts > 0.0) {
                        lastc = c;
                        alast = arun;
                    }
                    a += ts;
                    arun = a;
                }
                tile_hit = hitc >= 0 ? hitc : lastc;
                tile_pre = hitc >= 0 ? a : alast;
                lastpos = -1;
            }
            __syncthreads();
            const long long c = tile_hit, j = c * B + tid;
            const double x = j < n ? res[j] : 0.0;
            scan[tid] = x;
            __syncthreads();
            for (int o = 1; o < B; o <<= 1) {  // inclusive scan, a fixed order
                const double y = tid >= o ? scan[tid - o] : 0.0;
                __syncthreads();
                scan[tid] += y;
                __syncthreads();
            }
            const double a = tile_pre;
            const bool past = a + scan[tid] > target;
            const bool before = tid > 0 && a + scan[tid - 1] > target;
            if (past && !before) state[1] = j;  // the first index past the target
            if (x > 0.0) atomicMax(&lastpos, j);
            __syncthreads();
            if (tid == 0 && !(a + scan[B - 1] > target)) state[1] = lastpos;  // (rounding)
        }
        if (!grid_barrier(bar, nb)) return;
        s = ((volatile long long*)state)[1];
        const double sws = sw[s];
        for (long long k = tid; k < i; k += B) Fs[k] = ((const volatile double*)Ft)[k * n + s];
        __syncthreads();
        double gs = kp_entry(K, s, s) * sws * sws;
        for (long long k = 0; k < i; ++k) gs -= Fs[k] * Fs[k];
        if (!(gs > 0.0)) {
            stop = i;
            break;
        }
        const double inv = 1.0 / sqrt(gs);
        if (blockIdx.x == 0 && tid == 0) pivots[i] = s;
        double acc = 0.0;
        for (long long c = c0; c < c1; ++c) {
            const long long j = c * B + tid;
            double x = 0.0;
            if (j < n) {
                double g = kp_entry(K, s, j) * sw[j] * sws;
                long long k = 0;
                for (; k + 8 <= i; k += 8) {  // eight loads in flight, then the terms in order
                    double f[8];
                    for (int q = 0; q < 8; ++q) f[q] = Ft[(k + q) * n + j];
                    for (int q = 0; q < 8; ++q)
                        if (Fs[k + q] != 0.0) g -= f[q] * Fs[k + q];
                }
                for (; k < i; ++k)
                    if (Fs[k] != 0.0) g -= Ft[k * n + j] * Fs[k];
                const double f = g * inv;
                Ft[i * n + j] = f;
                const double dj = res[j] - f * f;
                x = (dj > 0.0 && j != s) ? dj : 0.0;
                res[j] = x;
            }
            const double ts = block_sum(x);
            if (tid == 0) {
                tsum[c] = ts;
                acc += ts;
            }
        }
        if (tid == 0) part[blockIdx.x] = acc;
    }
    if (blockIdx.x == 0 && tid == 0) state[0] = stop;
}

// Weighted RPCholesky (Alg. F.1, the steps of engine/cpu/src_cpp/rpcholesky.cpp).
// Part of the `kernels` module of the cuda backend (engine/cuda/source.py, MODULES):
// compiled after common.cuh, which defines KP, kp_entry, the argmins and grid_barrier.
//
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

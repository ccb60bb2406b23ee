// Stein thinning (Alg. D.1): one launch a step, and the persistent loop.
// Part of the `kernels` module of the cuda backend (engine/cuda/source.py, MODULES):
// compiled after common.cuh, which defines KP, kp_entry, the argmins and grid_barrier.
//
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

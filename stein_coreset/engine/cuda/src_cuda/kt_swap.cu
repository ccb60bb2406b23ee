// KT-Swap targeting P (Alg. D.3, as engine/cpu/src_cpp/kt_swap.cpp).
// Part of the `kernels` module of the cuda backend (engine/cuda/source.py, MODULES):
// compiled after common.cuh, which defines KP, kp_entry, the argmins and grid_barrier.
//
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

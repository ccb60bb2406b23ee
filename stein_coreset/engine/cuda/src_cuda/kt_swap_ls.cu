// KT-Swap-LS (Alg. G.2, as engine/cpu/src_cpp/kt_swap_ls.cpp).
// Part of the `kernels` module of the cuda backend (engine/cuda/source.py, MODULES):
// compiled after common.cuh, which defines KP, kp_entry, the argmins and grid_barrier.
//
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

// Dense evaluations: blocks, the diagonal, K w and index sums.
// Part of the `kernels` module of the cuda backend (engine/cuda/source.py, MODULES):
// compiled after common.cuh, which defines KP, kp_entry, the argmins and grid_barrier.
//

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

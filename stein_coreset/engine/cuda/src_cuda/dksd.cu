// The estimators' DKSD pair pass on the `cuda` backend, compiled at run time by NVRTC through
// cupy.RawModule as a module of its own (engine/cuda/source.py: the prelude,
// engine/shared/base_kernels.inc and engine/shared/radial.inc come first), so that a process
// which never fits a model does not compile it. The pair terms are radial.inc's, the text the C++ pass
// (engine/cpu/src_cpp/dksd.cpp) is built from.

// ---- the DKSD pair pass (Barp et al., 2019, Eq. 7; the rows of engine/cpu/src_cpp/dksd.cpp) ---
// Thread i computes row i of the C++ pass: the terms of its pairs (i, j), j != i, in increasing
// j and component order (radial.inc's dksd_radial / dksd_term / dksd_adjoint), so
// rows[i] = c sum_j k0(x_i, x_j) and, with grad, its own rows of Gv (n x d) and Gf (n x d, or
// n x d x d when full) are the C++'s; the host adds the rows as the C++ does. U, V: (n, d),
// F: (n, d) or (n, d, d) row-major; base, sigma, beta, lam: one per component; shared: every
// component has the same base kernel (one radial evaluation per pair).
// The adjoints are summed over j for every pair: dksd_rows_d<D> (d = D known at compile time)
// keeps the row's sums in registers and stores them once; dksd_rows (any d) adds into Gv and
// Gf in device memory, a read and a write per term. The same additions in the same order.

// where a row's adjoint sums live, zeroed: in registers (D > 0, d == D) or in the row's Gv / Gf
// themselves (D == 0; of d and fs entries, touched only with grad)
template <int D, int FULL>
struct DksdSums {
    double v[D], f[FULL ? D * D : D];
    __device__ DksdSums(double*, double*, int, long long, int) {
#pragma unroll
        for (int k = 0; k < D; ++k) v[k] = 0.0;
#pragma unroll
        for (int k = 0; k < (FULL ? D * D : D); ++k) f[k] = 0.0;
    }
    __device__ double& gv(int k) { return v[k]; }
    __device__ double& gf(int k) { return f[k]; }
    __device__ void store(double* Gv, double* Gf) const {
#pragma unroll
        for (int k = 0; k < D; ++k) Gv[k] = v[k];
#pragma unroll
        for (int k = 0; k < (FULL ? D * D : D); ++k) Gf[k] = f[k];
    }
};
template <int FULL>
struct DksdSums<0, FULL> {
    double *v, *f;
    __device__ DksdSums(double* Gv, double* Gf, int d, long long fs, int grad) : v(Gv), f(Gf) {
        if (!grad) return;
        for (int r = 0; r < d; ++r) v[r] = 0.0;
        for (long long r = 0; r < fs; ++r) f[r] = 0.0;
    }
    __device__ double& gv(int k) { return v[k]; }
    __device__ double& gf(int k) { return f[k]; }
    __device__ void store(double*, double*) const {}
};

template <int D, int FULL>
__device__ void dksd_rows_run(const double* U, const double* V, const double* F, long long n,
                              int d_rt, const int* base, const double* sigma,
                              const double* beta, const double* lam, int shared, double c,
                              int grad, double* rows, double* Gv, double* Gf) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int d = D > 0 ? D : d_rt;
    const long long fs = FULL ? (long long)d * d : d;
    const double* ui = U + i * d;
    const double* vi = V + i * d;
    const double* fi = F + i * fs;
    DksdSums<D, FULL> g(Gv + i * d, Gf + i * fs, d, fs, grad);
    double acc = 0.0;
    for (long long j = 0; j < n; ++j) {
        if (j == i) continue;
        const double* uj = U + j * d;
        const double* vj = V + j * d;
        const double* fj = F + j * fs;
        double q = 0.0;
#pragma unroll
        for (int l = 0; l < d; ++l) {
            const double du = ui[l] - uj[l];
            q += du * du;
        }
        double k0, k1, k2;
        if (shared) dksd_radial(base[0], sigma[0], beta[0], q, k0, k1, k2);
        // unrolled for a compile-time d, so that the sums' indices are constants (registers)
#pragma unroll
        for (int r = 0; r < d; ++r) {
            if (!shared) dksd_radial(base[r], sigma[r], beta[r], q, k0, k1, k2);
            double P, Q, R;
            if (FULL) {
                P = Q = R = 0.0;
#pragma unroll
                for (int l = 0; l < d; ++l) {
                    const double du = ui[l] - uj[l];
                    P += fi[l * d + r] * du;
                    Q += fj[l * d + r] * du;
                    R += fi[l * d + r] * fj[l * d + r];
                }
            } else {
                const double du = ui[r] - uj[r];
                P = fi[r] * du;
                Q = fj[r] * du;
                R = fi[r] * fj[r];
            }
            acc += dksd_term(lam[r], k0, k1, k2, vi[r], vj[r], P, Q, R);
            if (grad) {
                double gvr, AP, AR;
                dksd_adjoint(2.0 * c * lam[r], k0, k1, k2, vj[r], Q, gvr, AP, AR);
                g.gv(r) += gvr;
                if (FULL) {
#pragma unroll
                    for (int l = 0; l < d; ++l)
                        g.gf(l * d + r) += AP * (ui[l] - uj[l]) + AR * fj[l * d + r];
                } else {
                    g.gf(r) += AP * (ui[r] - uj[r]) + AR * fj[r];
                }
            }
        }
    }
    if (grad) g.store(Gv + i * d, Gf + i * fs);
    rows[i] = c * acc;
}

#define DKSD_ROWS_PARAMS                                                                      \
    const double *U, const double *V, const double *F, long long n, int d, const int *base,   \
        const double *sigma, const double *beta, const double *lam, int shared, double c,     \
        int grad, double *rows, double *Gv, double *Gf
#define DKSD_ROWS_ARGS U, V, F, n, d, base, sigma, beta, lam, shared, c, grad, rows, Gv, Gf

extern "C" __global__ void dksd_rows(DKSD_ROWS_PARAMS, int full) {
    if (full) {
        dksd_rows_run<0, 1>(DKSD_ROWS_ARGS);
    } else {
        dksd_rows_run<0, 0>(DKSD_ROWS_ARGS);
    }
}

// d known at compile time: up to 8 coordinates with a diagonal diffusion, 4 with a full one
#define DKSD_ROWS_ENTRY(D, FULL, NAME)                                                        \
    extern "C" __global__ void NAME(DKSD_ROWS_PARAMS) { dksd_rows_run<D, FULL>(DKSD_ROWS_ARGS); }
DKSD_ROWS_ENTRY(1, 0, dksd_rows_d1)
DKSD_ROWS_ENTRY(2, 0, dksd_rows_d2)
DKSD_ROWS_ENTRY(3, 0, dksd_rows_d3)
DKSD_ROWS_ENTRY(4, 0, dksd_rows_d4)
DKSD_ROWS_ENTRY(5, 0, dksd_rows_d5)
DKSD_ROWS_ENTRY(6, 0, dksd_rows_d6)
DKSD_ROWS_ENTRY(7, 0, dksd_rows_d7)
DKSD_ROWS_ENTRY(8, 0, dksd_rows_d8)
DKSD_ROWS_ENTRY(1, 1, dksd_rows_full_d1)
DKSD_ROWS_ENTRY(2, 1, dksd_rows_full_d2)
DKSD_ROWS_ENTRY(3, 1, dksd_rows_full_d3)
DKSD_ROWS_ENTRY(4, 1, dksd_rows_full_d4)

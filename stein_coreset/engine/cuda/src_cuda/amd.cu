// AMD on K' = F F^T + diag(res) (Alg. F.2, the steps of engine/cpu/src_cpp/amd.cpp).
// Part of the `kernels` module of the cuda backend (engine/cuda/source.py, MODULES):
// compiled after common.cuh, which defines KP, kp_entry, the argmins and grid_barrier.
//
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

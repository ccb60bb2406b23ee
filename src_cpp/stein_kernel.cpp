#include "stein_kernel.hpp"

namespace sc {

void gram(const KernelSpec& K, const int64_t* rows, int64_t nr, const int64_t* cols, int64_t nc,
          double* out) {
#pragma omp parallel for schedule(static)
    for (int64_t a = 0; a < nr; ++a) {
        const int64_t i = rows[a];
        double* o = out + a * nc;
        if (cols == nullptr) {
            for (int64_t j = 0; j < nc; ++j) o[j] = eval(K, i, j);
        } else {
            for (int64_t b = 0; b < nc; ++b) o[b] = eval(K, i, cols[b]);
        }
    }
}

void diag(const KernelSpec& K, double* out) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < K.n; ++i) out[i] = eval(K, i, i);
}

void matvec(const KernelSpec& K, const double* w, double* out) {
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t i = 0; i < K.n; ++i) {
        double acc = 0.0;
        for (int64_t j = 0; j < K.n; ++j) acc += eval(K, i, j) * w[j];
        out[i] = acc;
    }
}

}  // namespace sc

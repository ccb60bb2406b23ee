#include "compresspp.hpp"

#include "soa_kernel.hpp"

namespace sc {

void kernel_row_means(const KernelSpec& K, const int64_t* rows, int64_t nr, double* out) {
    DynamicTeams guard;
    SoAPoints P;
    P.load_all(K);
    const int64_t n = K.n;
    const double inv = 1.0 / static_cast<double>(n);
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t a = 0; a < nr; ++a) out[a] = soa_sum(K, rows[a], P, 0, n) * inv;
}

}  // namespace sc

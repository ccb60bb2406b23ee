#include "compresspp.hpp"

#include "cancel.hpp"
#include "parallel.hpp"
#include "soa_kernel.hpp"

namespace sc {

void kernel_row_means(const KernelSpec& K, const int64_t* rows, int64_t nr, double* out,
                      int n_threads) {
    const AllPoints all(K);
    const SoAView& P = all.view();
    const int64_t n = K.n;
    const double inv = 1.0 / static_cast<double>(n);
    Team team(n_threads);
    team.for_chunks(
        nr, [&](int64_t a) { poll_cancel(); out[a] = soa_sum(K, rows[a], P, 0, n) * inv; },
        nr * n > kParallelWork);
}

}  // namespace sc

#include "stein_kernel.hpp"

#include "soa_kernel.hpp"

namespace sc {

namespace {
constexpr int64_t kParallelEntries = 1 << 14;  // below this, a thread team costs more than it saves
}

// Parallel over all nr * nc entries (not over rows), so the one-column calls of RPCholesky and
// the greedy loops use every thread.
void gram(const KernelSpec& K, const int64_t* rows, int64_t nr, const int64_t* cols, int64_t nc,
          double* out) {
    const int64_t total = nr * nc;
#pragma omp parallel for schedule(static) if (total > kParallelEntries)
    for (int64_t e = 0; e < total; ++e) {
        const int64_t a = e / nc, b = e - a * nc;
        out[e] = eval(K, rows[a], cols == nullptr ? b : cols[b]);
    }
}

void diag(const KernelSpec& K, double* out) {
#pragma omp parallel for schedule(static) if (K.n > kParallelEntries)
    for (int64_t i = 0; i < K.n; ++i) out[i] = eval(K, i, i);
}

}  // namespace sc

#include "recombination.hpp"

#include "cancel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace sc {

namespace {

// Orthonormal basis (rows of V, q x N) of the null space of the m x N row-major matrix B,
// from a Householder QR with column pivoting of B^T. B's rows are equilibrated first (each
// scaled to max-abs 1), which leaves the null space unchanged and makes the rank decision
// relative to every row's own scale. Returns q.
int64_t null_basis(double* B, int64_t m, int64_t N, std::vector<double>& V) {
    // C = B^T, column-major N x mc over the nonzero rows of B.
    std::vector<double> C;
    C.reserve(static_cast<size_t>(m * N));
    int64_t mc = 0;
    for (int64_t r = 0; r < m; ++r) {
        double* row = B + r * N;
        double s = 0.0;
        for (int64_t j = 0; j < N; ++j) s = std::max(s, std::fabs(row[j]));
        if (!(s > 0.0) || !std::isfinite(s)) continue;
        for (int64_t j = 0; j < N; ++j) row[j] /= s;
        C.insert(C.end(), row, row + N);
        ++mc;
    }
    const int64_t kmax = std::min(N, mc);
    std::vector<double> beta(static_cast<size_t>(kmax), 0.0);
    const double tol = 10.0 * static_cast<double>(std::max(N, mc)) *
                       std::numeric_limits<double>::epsilon();
    double ref = 0.0;
    int64_t rank = 0;
    for (int64_t k = 0; k < kmax; ++k) {
        poll_cancel();
        // Pivot: the remaining column with the largest norm below row k.
        int64_t p = k;
        double best = -1.0;
        for (int64_t c = k; c < mc; ++c) {
            const double* col = C.data() + c * N;
            double s = 0.0;
            for (int64_t i = k; i < N; ++i) s += col[i] * col[i];
            if (s > best) {
                best = s;
                p = c;
            }
        }
        const double nrm = std::sqrt(best);
        if (k == 0) ref = nrm;
        if (!(nrm > tol * ref)) break;
        if (p != k) {
            std::swap_ranges(C.begin() + k * N, C.begin() + (k + 1) * N, C.begin() + p * N);
        }
        double* v = C.data() + k * N;  // Householder vector stored in place, entries k..N-1
        const double alpha = v[k] >= 0.0 ? -nrm : nrm;
        v[k] -= alpha;
        double vv = 0.0;
        for (int64_t i = k; i < N; ++i) vv += v[i] * v[i];
        beta[k] = 2.0 / vv;
        for (int64_t c = k + 1; c < mc; ++c) {
            double* col = C.data() + c * N;
            double dot = 0.0;
            for (int64_t i = k; i < N; ++i) dot += v[i] * col[i];
            dot *= beta[k];
            for (int64_t i = k; i < N; ++i) col[i] -= dot * v[i];
        }
        rank = k + 1;
    }
    // Null-space basis: Q e_i for i >= rank, Q = H_0 H_1 ... H_{rank-1}.
    const int64_t q = N - rank;
    V.assign(static_cast<size_t>(q * N), 0.0);
    for (int64_t a = 0; a < q; ++a) {
        poll_cancel();
        double* e = V.data() + a * N;
        e[rank + a] = 1.0;
        for (int64_t k = rank - 1; k >= 0; --k) {
            const double* v = C.data() + k * N;
            double dot = 0.0;
            for (int64_t i = k; i < N; ++i) dot += v[i] * e[i];
            dot *= beta[k];
            for (int64_t i = k; i < N; ++i) e[i] -= dot * v[i];
        }
    }
    return q;
}

}  // namespace

int64_t find_bfs(double* B, int64_t m, int64_t N, double* x) {
    std::vector<double> V;
    const int64_t q = null_basis(B, m, N, V);
    std::vector<double> u(static_cast<size_t>(q)), wrow(static_cast<size_t>(N));
    for (int64_t top = 0; top < q; ++top) {
        poll_cancel();
        const double* v = V.data() + top * N;
        // Move along +v or -v, whichever has the larger positive entry (>= 1/sqrt(N), the rows
        // being orthonormal). Taking any positive entry would not do: a null vector living on
        // columns of tiny scale can be negative there with only rounding-level positive entries,
        // and the ratio test would then take a huge step whose rounding error swamps A x.
        double vmax = 0.0, vmin = 0.0;
        for (int64_t j = 0; j < N; ++j) {
            vmax = std::max(vmax, v[j]);
            vmin = std::min(vmin, v[j]);
        }
        const double sgn = vmax >= -vmin ? 1.0 : -1.0;
        // Ratio test: the largest step keeping x >= 0 zeroes x_k.
        int64_t k = -1;
        double tbest = std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < N; ++j) {
            const double vj = sgn * v[j];
            if (vj > 0.0) {
                const double t = x[j] / vj;
                if (t < tbest) {
                    tbest = t;
                    k = j;
                }
            }
        }
        if (k < 0) break;  // unreachable for an orthonormal basis
        if (tbest > 0.0) {
            const double t = sgn * tbest;
            for (int64_t j = 0; j < N; ++j) {
                const double xj = x[j] - t * v[j];
                x[j] = xj > 0.0 ? xj : 0.0;
            }
        }
        x[k] = 0.0;
        // Reflect the remaining basis rows top..q-1 so that only row `top` is nonzero in
        // column k, then drop it: rows top+1..q-1 stay orthonormal and vanish at k.
        const int64_t nr = q - top;
        if (nr > 1) {
            double cn = 0.0;
            for (int64_t r = 0; r < nr; ++r) {
                u[r] = V[(top + r) * N + k];
                cn += u[r] * u[r];
            }
            cn = std::sqrt(cn);
            const double alpha = u[0] >= 0.0 ? -cn : cn;
            u[0] -= alpha;
            double uu = 0.0;
            for (int64_t r = 0; r < nr; ++r) uu += u[r] * u[r];
            if (uu > 0.0) {
                const double b = 2.0 / uu;
                std::fill(wrow.begin(), wrow.end(), 0.0);
                for (int64_t r = 0; r < nr; ++r) {
                    const double ur = u[r];
                    if (ur == 0.0) continue;
                    const double* row = V.data() + (top + r) * N;
                    for (int64_t j = 0; j < N; ++j) wrow[j] += ur * row[j];
                }
                for (int64_t r = 1; r < nr; ++r) {
                    const double f = b * u[r];
                    double* row = V.data() + (top + r) * N;
                    if (f != 0.0) {
                        for (int64_t j = 0; j < N; ++j) row[j] -= f * wrow[j];
                    }
                    row[k] = 0.0;
                }
            }
        }
    }
    int64_t nnz = 0;
    for (int64_t j = 0; j < N; ++j) nnz += x[j] > 0.0;
    return nnz;
}

int64_t recombination(const double* A, int64_t m, int64_t n, const double* x0, double* x) {
    return recombination_strided(A, m, n, n, 1, x0, x);
}

int64_t recombination_strided(const double* A, int64_t m, int64_t n, int64_t rs, int64_t cs,
                              const double* x0, double* x) {
    std::vector<int64_t> S;
    for (int64_t j = 0; j < n; ++j) {
        if (x0[j] > 0.0) {
            x[j] = x0[j];
            S.push_back(j);
        } else {
            x[j] = 0.0;
        }
    }
    if (m <= 0) {
        // No constraints: the empty vector matches them.
        for (int64_t j : S) x[j] = 0.0;
        return 0;
    }
    const int64_t nb = 2 * m;
    std::vector<double> Ahat(static_cast<size_t>(m * nb)), xhat(static_cast<size_t>(nb));
    std::vector<int64_t> bounds(static_cast<size_t>(nb + 1)), Snew;
    while (static_cast<int64_t>(S.size()) > nb) {
        poll_cancel();
        const int64_t s = static_cast<int64_t>(S.size());
        for (int64_t b = 0; b <= nb; ++b) bounds[b] = (b * s) / nb;
        // Collapse each block to one column: Ahat[:, b] = A[:, I_b] x[I_b], streaming A in its
        // storage order (rows of a row-major A, or points of a points-major A).
        if (rs >= cs) {
            for (int64_t r = 0; r < m; ++r) {
                const double* row = A + r * rs;
                for (int64_t b = 0; b < nb; ++b) {
                    double acc = 0.0;
                    for (int64_t a = bounds[b]; a < bounds[b + 1]; ++a) {
                        const int64_t j = S[a];
                        acc += row[j * cs] * x[j];
                    }
                    Ahat[r * nb + b] = acc;
                }
            }
        } else {
            std::vector<double> acc(static_cast<size_t>(m));
            for (int64_t b = 0; b < nb; ++b) {
                std::fill(acc.begin(), acc.end(), 0.0);
                for (int64_t a = bounds[b]; a < bounds[b + 1]; ++a) {
                    const int64_t j = S[a];
                    const double xj = x[j];
                    const double* col = A + j * cs;
                    for (int64_t r = 0; r < m; ++r) acc[r] += col[r * rs] * xj;
                }
                for (int64_t r = 0; r < m; ++r) Ahat[r * nb + b] = acc[r];
            }
        }
        std::fill(xhat.begin(), xhat.end(), 1.0);
        find_bfs(Ahat.data(), m, nb, xhat.data());
        Snew.clear();
        for (int64_t b = 0; b < nb; ++b) {
            const double f = xhat[b];
            for (int64_t a = bounds[b]; a < bounds[b + 1]; ++a) {
                const int64_t j = S[a];
                if (f > 0.0) {
                    x[j] *= f;
                    Snew.push_back(j);
                } else {
                    x[j] = 0.0;
                }
            }
        }
        S.swap(Snew);
    }
    // Final exact reduction on the surviving columns; with s <= m it still removes columns
    // when A is rank-deficient (then at most rank(A) nonzeros remain).
    const int64_t s = static_cast<int64_t>(S.size());
    if (s > 1) {
        std::vector<double> B(static_cast<size_t>(m * s)), xs(static_cast<size_t>(s));
        for (int64_t r = 0; r < m; ++r) {
            for (int64_t a = 0; a < s; ++a) B[r * s + a] = A[r * rs + S[a] * cs];
        }
        for (int64_t a = 0; a < s; ++a) xs[a] = x[S[a]];
        find_bfs(B.data(), m, s, xs.data());
        for (int64_t a = 0; a < s; ++a) x[S[a]] = xs[a];
    }
    int64_t nnz = 0;
    for (int64_t j : S) nnz += x[j] > 0.0;
    return nnz;
}

}  // namespace sc

#include "recombination.hpp"

#include "cancel.hpp"
#include "parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace sc {

namespace {

// Columns of the QR's update, and entries of Find-BFS's reflection, per chunk: fixed, and each
// column / entry is computed by one member in the serial order, so a result never depends on
// the team.
constexpr int64_t kQrCols = 4;
constexpr int64_t kBfsEntries = 32;
// single-thread ns of one multiply-add of these loops (a dependent sum, not vectorised)
constexpr double kFlopNs = 1.0;
// Relative width of a tie in the reduction's decisions (the QR's pivot and reflection signs,
// Find-BFS's direction, ratio test and reflection sign). Quantities that tie, or vanish, in
// exact arithmetic (a zero entry on a degenerate vertex, two equal column norms) come out of the
// floating point as rounding noise of either sign, ~1e-16 relative; the noise of the same
// points in another memory layout, or rescaled, differs (a layout changes the order of NumPy's
// sums, a rescale the rounding), and a decision taken on it chose another, equally valid, set of
// points. Within kTie of a tie the decision is fixed instead (the lower index, the positive
// sign); a value kTie from a tie is far above that noise, so the result is the same for all
// of them. Columns with a null-vector entry within kTie of zero are not candidates of the
// ratio test (moving along it they change by at most kTie of the step, clamped at 0).
constexpr double kTie = 1e-11;

// Orthonormal basis (rows of V, q x N) of the null space of the m x N row-major matrix B,
// from a Householder QR with column pivoting of B^T. B's rows are equilibrated first (each
// scaled to max-abs 1), which leaves the null space unchanged and makes the rank decision
// relative to every row's own scale. Returns q. On the team: step k applies reflection k - 1
// to the columns from k on, chunk by chunk, and takes their squared norms below row k; then
// one member picks the pivot and forms reflection k.
int64_t null_basis(double* B, int64_t m, int64_t N, std::vector<double>& V, Team& team) {
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
    std::vector<double> beta(static_cast<size_t>(kmax), 0.0), norm2(static_cast<size_t>(mc));
    const double tol = 10.0 * static_cast<double>(std::max(N, mc)) *
                       std::numeric_limits<double>::epsilon();
    double ref = 0.0;
    int64_t rank = 0;
    auto qr_chunks = [mc](int64_t k) { return (mc - k + kQrCols - 1) / kQrCols; };
    const int qr_members = team.members_for(2.0 * kFlopNs * static_cast<double>(mc * N),
                                            qr_chunks(0), kmax);
    team.steps(
        qr_members, kmax, qr_chunks,
        [&](int64_t k, int64_t chunk, int) {
            const int64_t c0 = k + chunk * kQrCols, c1 = std::min(mc, c0 + kQrCols);
            for (int64_t c = c0; c < c1; ++c) {
                double* col = C.data() + c * N;
                if (k >= 1) {  // reflection k - 1
                    const double* v = C.data() + (k - 1) * N;
                    double dot = 0.0;
                    for (int64_t i = k - 1; i < N; ++i) dot += v[i] * col[i];
                    dot *= beta[static_cast<size_t>(k - 1)];
                    for (int64_t i = k - 1; i < N; ++i) col[i] -= dot * v[i];
                }
                double s = 0.0;
                for (int64_t i = k; i < N; ++i) s += col[i] * col[i];
                norm2[static_cast<size_t>(c)] = s;
            }
        },
        [&](int64_t k) {
            // Pivot: the remaining column with the largest norm below row k; of columns tied
            // within kTie, the first.
            double best = 0.0;
            for (int64_t c = k; c < mc; ++c) best = std::max(best, norm2[static_cast<size_t>(c)]);
            int64_t p = k;
            while (p + 1 < mc && norm2[static_cast<size_t>(p)] < best * (1.0 - kTie)) ++p;
            best = norm2[static_cast<size_t>(p)];
            const double nrm = std::sqrt(best);
            if (k == 0) ref = nrm;
            if (!(nrm > tol * ref)) return false;
            if (p != k) {
                std::swap_ranges(C.begin() + k * N, C.begin() + (k + 1) * N, C.begin() + p * N);
            }
            double* v = C.data() + k * N;  // Householder vector stored in place, entries k..N-1
            // the sign that avoids cancellation; either is exact for |v[k]| << nrm, and a v[k]
            // that is zero in exact arithmetic must not pick it by its rounding noise
            const double alpha = v[k] >= -kTie * nrm ? -nrm : nrm;
            v[k] -= alpha;
            double vv = 0.0;
            for (int64_t i = k; i < N; ++i) vv += v[i] * v[i];
            beta[static_cast<size_t>(k)] = 2.0 / vv;
            rank = k + 1;
            return true;
        });
    // Null-space basis: Q e_i for i >= rank, Q = H_0 H_1 ... H_{rank-1}; one vector per chunk.
    const int64_t q = N - rank;
    V.assign(static_cast<size_t>(q * N), 0.0);
    team.for_chunks_on(
        team.members_for(2.0 * kFlopNs * static_cast<double>(q * rank * N), q, 1), q,
        [&](int64_t a) {
            double* e = V.data() + a * N;
            e[rank + a] = 1.0;
            for (int64_t k = rank - 1; k >= 0; --k) {
                const double* v = C.data() + k * N;
                double dot = 0.0;
                for (int64_t i = k; i < N; ++i) dot += v[i] * e[i];
                dot *= beta[static_cast<size_t>(k)];
                for (int64_t i = k; i < N; ++i) e[i] -= dot * v[i];
            }
        });
    return q;
}

}  // namespace

namespace {

// Find-BFS on the team: the ratio test and the reflection's Householder vector of basis row
// `top` (serial, O(N + q)) between steps; the reflection of the remaining rows (O(N q)) in
// chunks of entries.
int64_t find_bfs_on(double* B, int64_t m, int64_t N, double* x, Team& team) {
    std::vector<double> V;
    const int64_t q = null_basis(B, m, N, V, team);
    std::vector<double> u(static_cast<size_t>(std::max<int64_t>(q, 1))),
        wrow(static_cast<size_t>(N));
    int64_t k = -1, nr = 0;  // the zeroed column and the rows of the pending reflection
    double b = 0.0;          // its 2 / |u|^2, 0 when there is nothing to reflect
    // moves x along basis row `top` and prepares the reflection; false when no step is left
    auto advance = [&](int64_t top) {
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
        // (+v of the two within kTie)
        const double sgn = vmax >= (1.0 - kTie) * -vmin ? 1.0 : -1.0;
        // Ratio test: the largest step keeping x >= 0 zeroes x_k; of the columns whose ratios
        // tie within kTie, the first. Entries within kTie of zero are not candidates.
        const double vfloor = kTie * std::max(vmax, -vmin);
        double tbest = std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < N; ++j) {
            const double vj = sgn * v[j];
            if (vj > vfloor) tbest = std::min(tbest, x[j] / vj);
        }
        k = -1;
        for (int64_t j = 0; j < N && k < 0; ++j) {
            const double vj = sgn * v[j];
            if (vj > vfloor && x[j] / vj <= tbest * (1.0 + kTie)) k = j;
        }
        if (k < 0) return false;  // unreachable for an orthonormal basis
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
        nr = q - top;
        b = 0.0;
        if (nr > 1) {
            double cn = 0.0;
            for (int64_t r = 0; r < nr; ++r) {
                u[static_cast<size_t>(r)] = V[static_cast<size_t>((top + r) * N + k)];
                cn += u[static_cast<size_t>(r)] * u[static_cast<size_t>(r)];
            }
            cn = std::sqrt(cn);
            const double alpha = u[0] >= -kTie * cn ? -cn : cn;  // as in the QR
            u[0] -= alpha;
            double uu = 0.0;
            for (int64_t r = 0; r < nr; ++r) uu += u[static_cast<size_t>(r)] * u[static_cast<size_t>(r)];
            if (uu > 0.0) b = 2.0 / uu;
        }
        return true;
    };
    if (q > 0 && advance(0)) {
        const int64_t nchunks = (N + kBfsEntries - 1) / kBfsEntries;
        team.steps(
            team.members_for(2.0 * kFlopNs * static_cast<double>(q * N), nchunks, q), q,
            [nchunks](int64_t) { return nchunks; },
            [&](int64_t top, int64_t chunk, int) {
                if (b == 0.0) return;
                const int64_t j0 = chunk * kBfsEntries, j1 = std::min(N, j0 + kBfsEntries);
                for (int64_t j = j0; j < j1; ++j) wrow[static_cast<size_t>(j)] = 0.0;
                for (int64_t r = 0; r < nr; ++r) {
                    const double ur = u[static_cast<size_t>(r)];
                    if (ur == 0.0) continue;
                    const double* row = V.data() + (top + r) * N;
                    for (int64_t j = j0; j < j1; ++j) wrow[static_cast<size_t>(j)] += ur * row[j];
                }
                for (int64_t r = 1; r < nr; ++r) {
                    const double f = b * u[static_cast<size_t>(r)];
                    double* row = V.data() + (top + r) * N;
                    if (f != 0.0) {
                        for (int64_t j = j0; j < j1; ++j) row[j] -= f * wrow[static_cast<size_t>(j)];
                    }
                    if (k >= j0 && k < j1) row[k] = 0.0;
                }
            },
            [&](int64_t top) { return top + 1 < q && advance(top + 1); });
    }
    int64_t nnz = 0;
    for (int64_t j = 0; j < N; ++j) nnz += x[j] > 0.0;
    return nnz;
}

}  // namespace

int64_t find_bfs(double* B, int64_t m, int64_t N, double* x, int n_threads) {
    Team team(n_threads);
    return find_bfs_on(B, m, N, x, team);
}

int64_t recombination(const double* A, int64_t m, int64_t n, const double* x0, double* x,
                      int n_threads) {
    return recombination_strided(A, m, n, n, 1, x0, x, n_threads);
}

int64_t recombination_strided(const double* A, int64_t m, int64_t n, int64_t rs, int64_t cs,
                              const double* x0, double* x, int n_threads) {
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
    Team team(n_threads);
    const int64_t nb = 2 * m;
    std::vector<double> Ahat(static_cast<size_t>(m * nb)), xhat(static_cast<size_t>(nb));
    std::vector<int64_t> bounds(static_cast<size_t>(nb + 1)), Snew;
    while (static_cast<int64_t>(S.size()) > nb) {
        poll_cancel();
        const int64_t s = static_cast<int64_t>(S.size());
        for (int64_t b = 0; b <= nb; ++b) bounds[b] = (b * s) / nb;
        // Collapse each block to one column: Ahat[:, b] = A[:, I_b] x[I_b], streaming A in its
        // storage order (rows of a row-major A, or points of a points-major A); a chunk is a
        // row or a block.
        const double work = kFlopNs * static_cast<double>(m * s);
        if (rs >= cs) {
            team.for_chunks_on(team.members_for(work, m, 1), m, [&](int64_t r) {
                const double* row = A + r * rs;
                for (int64_t b = 0; b < nb; ++b) {
                    double acc = 0.0;
                    for (int64_t a = bounds[b]; a < bounds[b + 1]; ++a) {
                        const int64_t j = S[a];
                        acc += row[j * cs] * x[j];
                    }
                    Ahat[r * nb + b] = acc;
                }
            });
        } else {
            team.for_chunks_on(team.members_for(work, nb, 1), nb, [&](int64_t b) {
                std::vector<double> acc(static_cast<size_t>(m), 0.0);
                for (int64_t a = bounds[b]; a < bounds[b + 1]; ++a) {
                    const int64_t j = S[a];
                    const double xj = x[j];
                    const double* col = A + j * cs;
                    for (int64_t r = 0; r < m; ++r) acc[r] += col[r * rs] * xj;
                }
                for (int64_t r = 0; r < m; ++r) Ahat[r * nb + b] = acc[r];
            });
        }
        std::fill(xhat.begin(), xhat.end(), 1.0);
        find_bfs_on(Ahat.data(), m, nb, xhat.data(), team);
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
        find_bfs_on(B.data(), m, s, xs.data(), team);
        for (int64_t a = 0; a < s; ++a) x[S[a]] = xs[a];
    }
    int64_t nnz = 0;
    for (int64_t j : S) nnz += x[j] > 0.0;
    return nnz;
}

}  // namespace sc

// The figures of the nearest-neighbour score-field test (see score_field.hpp).
#include "score_field.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cancel.hpp"

namespace sc {

namespace {

using Vec = std::vector<double>;

constexpr int64_t kQueries = 4;   // queries whose distances to a row are summed together
constexpr double kInf = std::numeric_limits<double>::infinity();

// Robust scale of each column of the coordinate-major A (column c at A[c * ld ..]): the
// interquartile range / 1.349, else the population sd, else 1. With `mid`, also each column's
// two middle values (ranks (m - 1) / 2 and m / 2, one value for odd m) at mid[2 c], mid[2 c + 1],
// from the same selection.
Vec robust_scale(const Vec& A, int64_t m, int64_t d, int64_t ld, Vec* mid = nullptr) {
    Vec a(static_cast<size_t>(d)), col(static_cast<size_t>(m));
    const int64_t lo = (m - 1) / 4, hi = (3 * (m - 1)) / 4, h = m / 2;
    const bool chain = lo < h && h < hi;  // the middle ranks lie between the quartiles' ranks
    if (mid != nullptr) mid->assign(static_cast<size_t>(2 * d), 0.0);
    for (int64_t c = 0; c < d; ++c) {
        const double* Ac = &A[c * ld];
        std::copy(Ac, Ac + m, col.begin());
        const auto at = [&](int64_t k) { return col.begin() + k; };
        std::nth_element(col.begin(), at(hi), col.end());
        const double vhi = col[hi];
        double upper = 0.0, lower = 0.0;
        if (mid != nullptr && chain) {  // [0, hi) holds the ranks below hi
            std::nth_element(col.begin(), at(h), at(hi));
            upper = col[h];
            std::nth_element(col.begin(), at(lo), at(h));
            lower = m % 2 == 0 ? *std::max_element(at(lo), at(h)) : upper;
        } else {
            std::nth_element(col.begin(), at(lo), at(hi));
        }
        double s = (vhi - col[lo]) / 1.349;
        if (mid != nullptr && !chain) {
            std::nth_element(col.begin(), at(h), col.end());
            upper = col[h];
            lower = m % 2 == 0 ? *std::max_element(col.begin(), at(h)) : upper;
        }
        if (mid != nullptr) {
            (*mid)[2 * c] = lower;
            (*mid)[2 * c + 1] = upper;
        }
        if (!(s > 0.0)) {
            double mean = 0.0, ss = 0.0;
            for (int64_t i = 0; i < m; ++i) mean += Ac[i];
            mean /= static_cast<double>(m);
            for (int64_t i = 0; i < m; ++i) ss += (Ac[i] - mean) * (Ac[i] - mean);
            s = std::sqrt(ss / static_cast<double>(m));
        }
        a[c] = s > 0.0 ? s : 1.0;
    }
    return a;
}

// Z -> Z L^-T, T -> T L with L L^T the covariance of the clipped, median-centred Z (plus a
// ridge); false (nothing changed) when that is not positive definite. Zc, Tc coordinate-major
// (coordinate c of row i at c * ld + i), so every loop over the rows is contiguous and vectorises
// without reordering any row's sums.
bool whiten_rows(Vec& Zc, Vec& Tc, int64_t m, int64_t d, int64_t ld, const Vec& med) {
    Vec L(static_cast<size_t>(d * d), 0.0), y(static_cast<size_t>(d));
    for (int64_t i = 0; i < m; ++i) {  // row by row: the inner loop runs along a row of L
        for (int64_t c = 0; c < d; ++c)
            y[c] = std::min(5.0, std::max(-5.0, Zc[c * ld + i] - med[c]));
        for (int64_t j = 0; j < d; ++j) {
            const double yj = y[j];
            double* Lj = &L[j * d];
            for (int64_t k = 0; k <= j; ++k) Lj[k] += yj * y[k];
        }
    }
    double trace = 0.0;
    for (int64_t j = 0; j < d; ++j) {
        for (int64_t k = 0; k <= j; ++k) L[j * d + k] /= static_cast<double>(m);
        trace += L[j * d + j];
    }
    const double ridge = 1e-9 * trace / static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) L[j * d + j] += ridge;
    for (int64_t j = 0; j < d; ++j) {  // Cholesky in place, lower triangle
        for (int64_t k = 0; k <= j; ++k) {
            double s = L[j * d + k];
            for (int64_t p = 0; p < k; ++p) s -= L[j * d + p] * L[k * d + p];
            if (k == j) {
                if (!(s > 0.0) || !std::isfinite(s)) return false;
                L[j * d + j] = std::sqrt(s);
            } else {
                L[j * d + k] = s / L[k * d + k];
            }
        }
    }
    for (int64_t j = 0; j < d; ++j) {  // L z' = z, all rows at once
        double* zj = &Zc[j * ld];
        for (int64_t p = 0; p < j; ++p) {
            const double l = L[j * d + p];
            const double* zp = &Zc[p * ld];
            for (int64_t i = 0; i < m; ++i) zj[i] -= l * zp[i];
        }
        const double ljj = L[j * d + j];
        for (int64_t i = 0; i < m; ++i) zj[i] /= ljj;
    }
    Vec Tn(static_cast<size_t>(ld * d), 0.0);  // t'_k = sum_{j >= k} L[j][k] t_j
    for (int64_t k = 0; k < d; ++k) {
        double* tk = &Tn[k * ld];
        for (int64_t j = k; j < d; ++j) {
            const double l = L[j * d + k];
            const double* tj = &Tc[j * ld];
            for (int64_t i = 0; i < m; ++i) tk[i] += l * tj[i];
        }
    }
    Tc.swap(Tn);
    return true;
}

}  // namespace

int64_t score_field_rows(const double* X, const double* S, int64_t k, int64_t d,
                         int64_t no_prev, int64_t* keep, int64_t* counts) {
    int64_t repeats = 0, conflicts = 0, m = 0;
    for (int64_t i = 0; i < k; ++i) {
        const double* x = &X[i * d];
        if (i >= no_prev) {
            const double* xp = &X[(k + i) * d];
            if (std::equal(x, x + d, xp)) {
                ++repeats;
                const double* s = &S[i * d];
                const double* sp = &S[(k + i) * d];
                for (int64_t c = 0; c < d; ++c) {
                    const double tol = 1e-6 * (std::abs(s[c]) + std::abs(sp[c])) + 1e-300;
                    if (std::abs(s[c] - sp[c]) > tol) {
                        ++conflicts;
                        break;
                    }
                }
            }
        }
        if (i == 0 || !std::equal(x, x + d, &X[(i - 1) * d])) keep[m++] = i;
    }
    counts[0] = repeats;
    counts[1] = conflicts;
    return m;
}

void score_field_figures(const double* X, const double* S, const int64_t* keep, int64_t m,
                         int64_t d, const int64_t* q, int64_t nq, const int64_t* part, int64_t K,
                         bool whiten, int64_t* nn, double* figures) {
    // coordinate-major copies (column c at c * ld) for the column statistics and the whitening
    const int64_t ld = m;
    Vec Zc(static_cast<size_t>(ld * d)), Tc(static_cast<size_t>(ld * d));
    for (int64_t c = 0; c < d; ++c)  // written contiguously
        for (int64_t i = 0; i < m; ++i) {
            Zc[c * ld + i] = X[keep[i] * d + c];
            Tc[c * ld + i] = S[keep[i] * d + c];
        }
    Vec mid;  // X's middle values; Z = X / a has their quotients (x -> x / a is monotone)
    const Vec a = robust_scale(Zc, m, d, ld, whiten ? &mid : nullptr);
    for (int64_t c = 0; c < d; ++c)
        for (int64_t i = 0; i < m; ++i) {
            Zc[c * ld + i] /= a[c];
            Tc[c * ld + i] *= a[c];
        }
    if (whiten) {
        Vec med(static_cast<size_t>(d));  // numpy.median of Z's columns
        for (int64_t c = 0; c < d; ++c) med[c] = (mid[2 * c] / a[c] + mid[2 * c + 1] / a[c]) / 2.0;
        whiten_rows(Zc, Tc, m, d, ld, med);
    }
    const Vec b = robust_scale(Tc, m, d, ld);

    Vec Tr(static_cast<size_t>(m * d));  // T row-major, for the few rows each query compares
    for (int64_t c = 0; c < d; ++c)
        for (int64_t i = 0; i < m; ++i) Tr[i * d + c] = Tc[c * ld + i] / b[c];
    const auto t_dist = [&](int64_t i, int64_t j) {
        double s = 0.0;
        for (int64_t c = 0; c < d; ++c) {
            const double t = Tr[i * d + c] - Tr[j * d + c];
            s += t * t;
        }
        return s;
    };

    Vec Zr(static_cast<size_t>(m * d));  // Z row-major: each row read once per block of queries
    for (int64_t c = 0; c < d; ++c)
        for (int64_t i = 0; i < m; ++i) Zr[i * d + c] = Zc[c * ld + i];
    for (int64_t i0 = 0; i0 < nq; i0 += kQueries) {
        poll_cancel();
        const int64_t nb = std::min(kQueries, nq - i0);
        const double* zq[kQueries];
        double best_d[kQueries];
        for (int64_t b = 0; b < kQueries; ++b) {
            zq[b] = &Zr[q[i0 + std::min(b, nb - 1)] * d];  // a short block repeats its last
            best_d[b] = kInf;
            if (b < nb) nn[i0 + b] = q[i0 + b] == 0 ? 1 : 0;  // kept if all are infinite
        }
        for (int64_t j = 0; j < m; ++j) {
            // the squared distances of row j to kQueries queries at once, each summed
            // coordinate by coordinate (kQueries independent sums in flight)
            const double* zj = &Zr[j * d];
            double acc[kQueries] = {};
            for (int64_t c = 0; c < d; ++c) {
                const double v = zj[c];
                for (int64_t b = 0; b < kQueries; ++b) {
                    const double t = v - zq[b][c];
                    acc[b] += t * t;
                }
            }
            for (int64_t b = 0; b < nb; ++b)  // the first of the nearest rows other than q
                if (acc[b] < best_d[b] && j != q[i0 + b]) {
                    best_d[b] = acc[b];
                    nn[i0 + b] = j;
                }
        }
    }
    double closer = 0.0;
    std::vector<int64_t> keys(static_cast<size_t>(nq));
    for (int64_t i = 0; i < nq; ++i) {
        const int64_t qi = q[i], bi = nn[i];
        const double d_nn = t_dist(qi, bi);
        for (int64_t k = 0; k < K; ++k) {
            const double d_part = t_dist(qi, part[i * K + k]);
            closer += d_nn < d_part ? 1.0 : (d_nn == d_part ? 0.5 : 0.0);
        }
        keys[i] = std::min(qi, bi) * m + std::max(qi, bi);
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    double sign = 0.0;
    for (const int64_t key : keys) {
        const int64_t ia = keep[key / m], ib = keep[key % m];
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c)
            dot += (S[ia * d + c] - S[ib * d + c]) * (X[ia * d + c] - X[ib * d + c]);
        sign += dot < 0.0 ? 1.0 : (dot == 0.0 ? 0.5 : 0.0);
    }
    figures[0] = closer;
    figures[1] = static_cast<double>(keys.size());
    figures[2] = sign;
}

}  // namespace sc

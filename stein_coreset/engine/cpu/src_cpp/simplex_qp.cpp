// Primal active-set QP on the simplex with an updated Cholesky factor (see simplex_qp.hpp).
#include "simplex_qp.hpp"

#include "cancel.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sc {

namespace {

// sum_c a[c] b[c] over eight partial sums (the compiler may not reorder a floating-point
// reduction by itself, and a single chain runs at one add per cycle's latency)
inline double dot(const double* a, const double* b, int64_t n) {
    double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        for (int q = 0; q < 8; ++q) s[q] += a[c + q] * b[c + q];
    for (; c < n; ++c) s[0] += a[c] * b[c];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// Lower-triangular factor L (k x k, row-major in a p x p buffer) of Ks restricted to the
// ordered free list `idx`, with Ks_ij = K_ij / (d_i d_j).
struct FreeFactor {
    const double* K;
    const double* d;
    int64_t p;
    std::vector<double> L;
    std::vector<int64_t> idx;
    std::vector<double> tmp;

    FreeFactor(const double* K_, const double* d_, int64_t p_)
        : K(K_), d(d_), p(p_), L(static_cast<size_t>(p_ * p_), 0.0), tmp(static_cast<size_t>(p_)) {}

    int64_t k() const { return static_cast<int64_t>(idx.size()); }
    double ks(int64_t i, int64_t j) const {
        return 0.5 * (K[i * p + j] / (d[i] * d[j]) + K[j * p + i] / (d[j] * d[i]));
    }
    double* row(int64_t r) { return L.data() + r * p; }

    // append point j: l = L^{-1} Ks[idx, j], pivot = sqrt(Ks_jj - l.l); false if not positive
    bool add(int64_t j) {
        const int64_t n = k();
        double* lr = row(n);
        double ss = 0.0;
        for (int64_t r = 0; r < n; ++r) {
            const double* Lr = row(r);
            lr[r] = (ks(idx[r], j) - dot(Lr, lr, r)) / Lr[r];
            ss += lr[r] * lr[r];
        }
        const double piv2 = ks(j, j) - ss;
        if (!(piv2 > 0.0)) return false;
        lr[n] = std::sqrt(piv2);
        idx.push_back(j);
        // pivots already in the factor do not change when a point enters, so once the free
        // set fails solve()'s conditioning test every larger one does: stop here, not after
        // factoring the rest
        return conditioned();
    }

    bool conditioned() {
        double lo = INFINITY, hi = 0.0;
        for (int64_t r = 0; r < k(); ++r) {
            const double v = row(r)[r];
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        return lo * lo > 1e-10 * hi * hi;
    }

    // delete position q: drop its row, then rotate column pairs (c, c + 1) for c >= q so the
    // rows below become lower triangular again; L L^T is the factor of the remaining points
    void remove(int64_t q) {
        const int64_t n = k();
        for (int64_t r = q; r + 1 < n; ++r) std::copy(row(r + 1), row(r + 1) + n, row(r));
        for (int64_t c = q; c + 1 < n; ++c) {
            double* Lc = row(c);
            const double a = Lc[c], b = Lc[c + 1];
            const double h = std::hypot(a, b);
            const double cs = h > 0.0 ? a / h : 1.0, sn = h > 0.0 ? b / h : 0.0;
            for (int64_t r = c; r + 1 < n; ++r) {
                double* Lr = row(r);
                const double x = Lr[c], y = Lr[c + 1];
                Lr[c] = cs * x + sn * y;
                Lr[c + 1] = -sn * x + cs * y;
            }
            Lc[c + 1] = 0.0;
        }
        for (int64_t r = 0; r + 1 < n; ++r) row(r)[n - 1] = 0.0;
        idx.erase(idx.begin() + q);
    }

    // y = Ks_PP^{-1} c_P (c = 1 / d) into tmp[0..k); false if the pivots show Ks_PP ill
    // conditioned (the criterion of affine_weights)
    bool solve() {
        const int64_t n = k();
        if (!conditioned()) return false;
        for (int64_t r = 0; r < n; ++r) {
            const double* Lr = row(r);
            tmp[r] = (1.0 / d[idx[r]] - dot(Lr, tmp.data(), r)) / Lr[r];
        }
        for (int64_t r = n - 1; r >= 0; --r) {
            double s = tmp[r];
            for (int64_t c = r + 1; c < n; ++c) s -= row(c)[r] * tmp[c];
            tmp[r] = s / row(r)[r];
        }
        return true;
    }
};

double quad(const double* K, int64_t p, const double* w) {
    double f = 0.0;
    for (int64_t i = 0; i < p; ++i) {
        if (w[i] != 0.0) f += w[i] * dot(K + i * p, w, p);
    }
    return f;
}

// z = argmin_{1^T z = 1} z^T K z on the points F holds: Ks y = c, z = y / d / sum (false if the
// factor is ill conditioned or the sum is not positive and finite)
bool affine_step(FreeFactor& F, const double* d, double* z) {
    const int64_t k = F.k();
    if (k == 1) {
        z[F.idx[0]] = 1.0;
        return true;
    }
    if (!F.solve()) return false;
    double s = 0.0;
    for (int64_t r = 0; r < k; ++r) s += F.tmp[r] / d[F.idx[r]];
    if (!(s > 0.0) || !std::isfinite(s)) return false;
    for (int64_t r = 0; r < k; ++r) z[F.idx[r]] = F.tmp[r] / d[F.idx[r]] / s;
    return true;
}

void unit_scaling(const double* K, int64_t p, double* d) {
    for (int64_t i = 0; i < p; ++i) {
        const double g = K[i * p + i];
        d[i] = std::sqrt(g > 0.0 ? g : 1.0);
    }
}

}  // namespace

bool affine_weights(const double* K, int64_t p, double* out) {
    std::vector<double> d(static_cast<size_t>(p));
    unit_scaling(K, p, d.data());
    FreeFactor F(K, d.data(), p);
    for (int64_t i = 0; i < p; ++i) {
        poll_cancel();
        if (!F.add(i)) return false;
    }
    std::fill(out, out + p, 0.0);
    return affine_step(F, d.data(), out);
}

int64_t simplex_qp(const double* K, int64_t p, const double* w0, int64_t max_iter, double* out) {
    std::vector<double> w(static_cast<size_t>(p)), z(static_cast<size_t>(p)),
        d(static_cast<size_t>(p)), best(static_cast<size_t>(p)), grad(static_cast<size_t>(p));
    double tot = 0.0, scale = 0.0;
    unit_scaling(K, p, d.data());
    for (int64_t i = 0; i < p; ++i) {
        w[i] = std::max(w0[i], 0.0);
        tot += w[i];
        scale = std::max(scale, std::fabs(K[i * p + i]));
    }
    scale = std::max(scale, 1e-300);
    for (auto& v : w) v /= tot;
    best = w;
    double fbest = quad(K, p, w.data());
    if (p == 1) {
        out[0] = 1.0;
        return 0;
    }
    FreeFactor F(K, d.data(), p);
    std::vector<char> free(static_cast<size_t>(p), 0);
    for (int64_t i = 0; i < p; ++i)
        if (w[i] > 0.0) {
            if (!F.add(i)) return -1;
            free[i] = 1;
        }
    int64_t it = 0;
    for (; it < max_iter; ++it) {
        poll_cancel();
        const int64_t k = F.k();
        double f;  // w^T K w of this step's iterate
        std::fill(z.begin(), z.end(), 0.0);
        if (!affine_step(F, d.data(), z.data())) return -1;
        bool feasible = true;
        for (int64_t r = 0; r < k; ++r) feasible = feasible && z[F.idx[r]] >= 0.0;
        if (feasible) {
            w = z;
            double lam = 0.0;  // w^T grad = 2 w^T K w, so f below is lam / 2 exactly
            for (int64_t i = 0; i < p; ++i) {
                grad[i] = 2.0 * dot(K + i * p, w.data(), p);
                lam += w[i] * grad[i];
            }
            f = 0.5 * lam;
            int64_t jmin = -1;
            double numin = INFINITY;
            for (int64_t i = 0; i < p; ++i) {
                const double nu = free[i] ? 0.0 : grad[i] - lam;
                if (nu < numin) {
                    numin = nu;
                    jmin = i;
                }
            }
            if (numin >= -1e-12 * scale) {
                if (f <= fbest) best = w;
                break;
            }
            if (!F.add(jmin)) return -1;
            free[jmin] = 1;
        } else {
            double alpha = INFINITY;
            for (int64_t r = 0; r < k; ++r) {
                const int64_t i = F.idx[r];
                if (z[i] < 0.0) alpha = std::min(alpha, w[i] / (w[i] - z[i]));
            }
            double s = 0.0;
            for (int64_t i = 0; i < p; ++i) {
                const bool blocked = free[i] && z[i] < 0.0 && w[i] / (w[i] - z[i]) <= alpha;
                w[i] = blocked ? 0.0 : std::max(w[i] + alpha * (z[i] - w[i]), 0.0);
                s += w[i];
            }
            for (auto& v : w) v /= s;
            for (int64_t r = F.k() - 1; r >= 0; --r)
                if (!(w[F.idx[r]] > 0.0)) {
                    free[F.idx[r]] = 0;
                    F.remove(r);
                }
            f = quad(K, p, w.data());
        }
        if (f <= fbest) {
            best = w;
            fbest = f;
        }
    }
    std::copy(best.begin(), best.end(), out);
    return it;
}

}  // namespace sc

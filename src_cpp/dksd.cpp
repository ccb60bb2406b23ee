#include "dksd.hpp"

#include "cancel.hpp"
#include "parallel.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace sc {

namespace {

// One row i of the pass; FULL / GRAD are compile-time so the inner loops carry no branches.
template <bool FULL, bool GRAD>
double dksd_row(const DKSDSpec& S, int64_t i, double c, const std::vector<int64_t>& kid,
                const std::vector<int64_t>& rep, double* k0, double* k1, double* k2, double* du,
                double* Gv, double* Gf) {
    const int64_t n = S.n, d = S.d, nk = static_cast<int64_t>(rep.size());
    const int64_t fstride = FULL ? d * d : d;
    const double* ui = S.U + i * d;
    const double* vi = S.V + i * d;
    const double* fi = S.F + i * fstride;
    double* gv = GRAD ? Gv + i * d : nullptr;
    double* gf = GRAD ? Gf + i * fstride : nullptr;
    if (GRAD) {
        for (int64_t r = 0; r < d; ++r) gv[r] = 0.0;
        for (int64_t r = 0; r < fstride; ++r) gf[r] = 0.0;
    }
    double acc = 0.0;
    for (int64_t j = 0; j < n; ++j) {
        if (j == i) continue;
        const double* uj = S.U + j * d;
        const double* vj = S.V + j * d;
        const double* fj = S.F + j * fstride;
        double q = 0.0;
        for (int64_t l = 0; l < d; ++l) {
            du[l] = ui[l] - uj[l];
            q += du[l] * du[l];
        }
        for (int64_t k = 0; k < nk; ++k) {
            const int64_t s = rep[k];
            portable::dksd_radial(S.base[s], S.sigma[s], S.beta[s], q, k0[k], k1[k], k2[k]);
        }
        for (int64_t r = 0; r < d; ++r) {
            const int64_t k = nk == 1 ? 0 : kid[r];
            double P, Q, R;
            if (FULL) {
                P = Q = R = 0.0;
                for (int64_t l = 0; l < d; ++l) {
                    P += fi[l * d + r] * du[l];
                    Q += fj[l * d + r] * du[l];
                    R += fi[l * d + r] * fj[l * d + r];
                }
            } else {
                P = fi[r] * du[r];
                Q = fj[r] * du[r];
                R = fi[r] * fj[r];
            }
            acc += portable::dksd_term(S.lam[r], k0[k], k1[k], k2[k], vi[r], vj[r], P, Q, R);
            if (GRAD) {
                double g, AP, AR;
                portable::dksd_adjoint(2.0 * c * S.lam[r], k0[k], k1[k], k2[k], vj[r], Q, g, AP,
                                       AR);
                gv[r] += g;
                if (FULL) {
                    for (int64_t l = 0; l < d; ++l) gf[l * d + r] += AP * du[l] + AR * fj[l * d + r];
                } else {
                    gf[r] += AP * du[r] + AR * fj[r];
                }
            }
        }
    }
    return c * acc;
}

}  // namespace

double dksd_pass(const DKSDSpec& S, double* Gv, double* Gf, int n_threads) {
    const int64_t n = S.n, d = S.d;
    if (n < 2 || d < 1) throw std::invalid_argument("dksd_pass needs n >= 2 and d >= 1");
    const double c = 1.0 / (static_cast<double>(n) * static_cast<double>(n - 1));
    const bool grad = Gv != nullptr && Gf != nullptr;
    // components sharing a base kernel evaluate it once per pair
    std::vector<int64_t> kid(d), rep;
    for (int64_t r = 0; r < d; ++r) {
        kid[r] = -1;
        for (int64_t k = 0; k < static_cast<int64_t>(rep.size()); ++k) {
            const int64_t s = rep[k];
            if (S.base[s] == S.base[r] && S.sigma[s] == S.sigma[r] && S.beta[s] == S.beta[r]) {
                kid[r] = k;
                break;
            }
        }
        if (kid[r] < 0) {
            kid[r] = static_cast<int64_t>(rep.size());
            rep.push_back(r);
        }
    }
    const int64_t nk = static_cast<int64_t>(rep.size());
    // rows in fixed chunks, partial sums added in chunk order: the value does not depend on the
    // number of threads
    constexpr int64_t kRows = 16;
    const int64_t nch = (n + kRows - 1) / kRows;
    std::vector<double> partial(static_cast<size_t>(nch), 0.0);
    Team team(n_threads);
    // a pair: nk radial evaluations and ~d (full: d^2) multiply-adds per component, twice with
    // the gradient
    const double pair_ns = (10.0 * static_cast<double>(nk) +
                            static_cast<double>(S.full ? d * d : d) * (grad ? 4.0 : 2.0));
    team.for_chunks_on(
        team.members_for(static_cast<double>(n) * static_cast<double>(n) * pair_ns, nch, 1),
        nch,
        [&](int64_t ch) {
            poll_cancel();
            std::vector<double> k0(nk), k1(nk), k2(nk), du(d);
            double* a = k0.data();
            double* b = k1.data();
            double* e = k2.data();
            double* u = du.data();
            double acc = 0.0;
            for (int64_t i = ch * kRows; i < std::min(n, (ch + 1) * kRows); ++i) {
                if (S.full) {
                    acc += grad ? dksd_row<true, true>(S, i, c, kid, rep, a, b, e, u, Gv, Gf)
                                : dksd_row<true, false>(S, i, c, kid, rep, a, b, e, u, Gv, Gf);
                } else {
                    acc += grad ? dksd_row<false, true>(S, i, c, kid, rep, a, b, e, u, Gv, Gf)
                                : dksd_row<false, false>(S, i, c, kid, rep, a, b, e, u, Gv, Gf);
                }
            }
            partial[static_cast<size_t>(ch)] = acc;
        });
    double total = 0.0;
    for (double v : partial) total += v;
    return total;
}

}  // namespace sc

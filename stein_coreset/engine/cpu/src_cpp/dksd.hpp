// The DKSD U-statistic (Barp et al., 2019, Eq. 7) and its adjoints in one pass over the pairs.
//
// Canonical form (see stein_coreset/estimators/losses.py): whitened points U (n x d), transformed
// v = m^T grad log p + div m (V, n x d), a diffusion F that is diagonal (n x d) or full
// (n x d x d, F[i, l, r]) and a matrix kernel K = diag(lam_r k_r) with radial k_r. Component r of
// k0(x_i, x_j), with delta = u_i - u_j, P = F_i^T delta, Q = F_j^T delta, R = (F_i^T F_j)_rr:
//   lam_r [ k0 v_ir v_jr - 2 k1 (v_ir Q_r - P_r v_jr + R_r) - 4 k2 P_r Q_r ],
// with (k0, k1, k2) and the term itself from radial.inc (dksd_radial, dksd_term, dksd_adjoint:
// the radial derivatives of the Stein kernel of stein_kernel.hpp, and the text the CUDA pass
// compiles too; the blocked pass evaluates their vector forms dksd_radial_local, dksd_term_of,
// dksd_adjoint_of). O(n^2 d) (diagonal) or O(n^2 d^2) (full) work; memory: one copy of
// U, V and F in 8-column tiles, and O(d kBlock) per thread.
//
// Blocked and vectorised (dksd_impl.inc, built per instruction set, the widest picked at run
// time): each row against blocks of 32-256 columns, 8 columns to a vector, the radial terms
// of each distinct base kernel for the whole block with the kernel a compile-time constant;
// with one shared kernel and a diagonal F the components' sums collapse to three per pair
// before the radial terms. Results equal the pair-by-pair formula to rounding (tested).
#pragma once

#include <cstdint>

#include "stein_kernel.hpp"

namespace sc {

struct DKSDSpec {
    int64_t n = 0;
    int64_t d = 0;
    const double* U = nullptr;  // n x d
    const double* V = nullptr;  // n x d
    const double* F = nullptr;  // n x d (full == false) or n x d x d (full == true)
    bool full = false;
    const int* base = nullptr;       // d base-kernel codes, one per component
    const double* sigma = nullptr;   // d
    const double* beta = nullptr;    // d
    const double* lam = nullptr;     // d
};

// Returns sum_{i != j} k0(x_i, x_j) / (n (n - 1)). When Gv is not null, also writes
// Gv = dL/dV (n x d) and Gf = dL/dF (the shape of F), using the symmetry of k0.
// Parallel over fixed chunks of rows with n_threads; the value does not depend on n_threads.
double dksd_pass(const DKSDSpec& S, double* Gv, double* Gf, int n_threads);

}  // namespace sc

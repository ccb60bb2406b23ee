"""DKSD / KSD U-statistics (Barp et al., 2019, Thm. 1, Eq. 6-7, App. B.3), their theta-gradients
and the kernel information tensor (Eq. 14).

For a matrix kernel K and a diffusion matrix m, write v(x) = m(x)^T grad log p(x) + div m(x),
with (div m)_r = sum_i d_i m_ir. Expanding Eq. 6 (App. B.3, Eq. 88-92) gives

    k0(x, y) = v_x^T K v_y + sum_{rs} [ v_x,r (m_y)_ls d_{y_l} K_rs + (m_x)_ir v_y,s d_{x_i} K_rs
                                        + (m_x)_ir (m_y)_ls d_{x_i} d_{y_l} K_rs ].

For K = diag(lambda_r k_r) with radial k_r(x, y) = kappa_r(||x - y||^2) each component r adds

    lambda_r [ kappa v_x,r v_y,r - 2 kappa' (v_x,r Q_r - P_r v_y,r + R_r) - 4 kappa'' P_r Q_r ]

with delta = x - y, P = m_x^T delta, Q = m_y^T delta, R_r = (m_x^T m_y)_rr. K = B k with B = C C^T
reduces to this with v -> C^T v, m -> m C, and a preconditioner M = L L^T of the base kernel
(||x - y||_M^2 = (x - y)^T M^{-1} (x - y)) with x -> L^{-1} x, m -> L^{-1} m. For m = I, K = I k
this is exactly the Stein kernel of :mod:`stein_coreset.kernels` (the same ``radial`` derivatives
kappa, kappa', q kappa''), and the ``"ksd"`` loss is evaluated by that module's
:class:`~stein_coreset.engine.KernelMatrix` itself: one implementation of k_p.

One pass per engine backend (docs/engine.md, "Notes on the loops").

Cost: one pass over all pairs, O(n^2 d) for scalar or diagonal m and K = I k or
diag(lambda_i k_i), O(n^2 d^2) for a full m (or dense B, or a preconditioner M); memory
O(block n), never n x n x d. The gradient in theta comes from the same pass: the pass returns
dL/dv_i and dL/dm_i (reverse mode by hand, using the symmetry of k0), then the chain rule with
the per-point Jacobians dv_i/dtheta, dm_i/dtheta (model ``score_dtheta``; central differences
of the O(n) per-point maps when a derivative is missing).
"""

from __future__ import annotations

from .. import _array_api as aa
from ..engine import BACKENDS as ENGINE_BACKENDS
from ..engine import KernelMatrix, get_backend, runner, squared_distances
from ..engine.reference.dksd import block_rows
from ..kernels import RadialKernel, SteinKernel
from .matrix_kernels import kernel_plan
from .pointwise import batch_diagonal, batch_trace, checked_scores, point_terms

__all__ = ["BACKENDS", "pair_pass", "dksd", "row_sums", "ksd_kernel_matrix",
           "ksd_value", "information"]

#: The pair pass's backends: the engine's (:data:`stein_coreset.engine.BACKENDS`) or "auto".
BACKENDS = ("auto", *ENGINE_BACKENDS)


def pair_pass(U, V, kind, F, comps, need_grad, block_size=None, backend="auto", n_threads=1):
    """U-statistic sum_{i != j} k0(x_i, x_j) / (n (n - 1)) in canonical form, and its adjoints
    (see :func:`stein_coreset.engine.reference.dksd.pair_pass` for the arguments), by the engine
    backend :func:`stein_coreset.engine.get_backend` picks over the components' base kernels:
    a base kernel the compiled code does not know (a user subclass) runs the array-API pass
    under "auto", and is refused by a compiled backend asked for by name.
    """
    xp, _ = aa.namespace(U=U)
    chosen = get_backend(backend, xp, *(b for b, _ in comps))
    return runner(chosen, "dksd_pass").dksd_pass(U, V, kind, F, comps, need_grad, block_size,
                                                 n_threads)


def _canonical(model, X, theta, kernel, diff, need_grad):
    """The pair pass's canonical form: whitened points U, v -> C^T v, m -> L^{-1} m C."""
    xp, dev = aa.namespace(X=X)
    n, d = int(X.shape[0]), int(X.shape[1])
    plan = kernel_plan(kernel, X, xp, dev)
    pts = point_terms(model, X, theta, diff, need_grad)
    U = plan.wh.points(X)
    kind, m = pts.kind, pts.m
    V = pts.v
    Ch = plan.C
    Cx = None
    # canonical form: K = diag(lambda_r k_r) in whitened coordinates
    if plan.full or kind == "full":
        if kind == "identity":
            F = xp.broadcast_to(xp.eye(d, dtype=xp.float64, device=dev)[None, ...], (n, d, d))
        elif kind == "scalar":
            F = m[:, None, None] * xp.eye(d, dtype=xp.float64, device=dev)[None, ...]
        elif kind == "diag":
            F = m[:, :, None] * xp.eye(d, dtype=xp.float64, device=dev)[None, ...]
        else:
            F = m
        if not plan.wh.identity:
            F = xp.matmul(plan.wh.LinvT.T[None, ...], F)
        if Ch is not None:
            Cx = aa.from_host(Ch, xp=xp, device=dev)
            F = xp.matmul(F, Cx[None, ...])
            V = V @ Cx
        ckind = "full"
    else:
        if kind == "identity":
            F = xp.ones((n, d), dtype=xp.float64, device=dev)
        elif kind == "scalar":
            F = xp.broadcast_to(m[:, None], (n, d))
        else:
            F = m
        ckind = "diag"
    return plan, pts, U, V, ckind, F, Cx


def row_sums(model, X, theta, kernel, diff, block_size=None, backend="auto", n_threads=1):
    """R_i = sum_{j != i} k0(x_i, x_j), (n,) host, from one pass with adjoints.

    Every term of k0(x, y) has one factor from each point's (v, m), so scaling point i's (v_i,
    m_i) by w_i scales k0(x_i, x_j) by w_i w_j, and d/dw_i of the pair sum at w = 1 is 2 R_i =
    n (n - 1) (G_V,i . v_i + G_F,i : m_i) with the pass's adjoints G_V, G_F. Cost: one pass
    (O(n^2 d)). Their theta-derivatives are the per-sample gradient contributions of the
    U-statistic's Hoeffding projection (Thm. 4).
    """
    xp, _ = aa.namespace(X=X)
    n = int(X.shape[0])
    plan, _pts, U, V, ckind, F, _ = _canonical(model, X, theta, kernel, diff, False)
    _total, GV, GF = pair_pass(U, V, ckind, F, plan.comps, True, block_size,
                               backend=backend, n_threads=n_threads)
    Ff = xp.broadcast_to(F, GF.shape) if tuple(F.shape) != tuple(GF.shape) else F
    r = xp.sum(GV * V, axis=1) + xp.sum(xp.reshape(GF * Ff, (n, -1)), axis=1)
    return aa.to_host(r) * (0.5 * n * (n - 1))


def dksd(model, X, theta, kernel, diff, need_grad, block_size=None, backend="auto",
         n_threads=1):
    """DKSD^2 U-statistic (Eq. 7) and optionally its theta-gradient (host (p,)), on validated
    arguments (``n_threads`` already a team size)."""
    xp, dev = aa.namespace(X=X)
    n = int(X.shape[0])
    plan, pts, U, V, ckind, F, Cx = _canonical(model, X, theta, kernel, diff, need_grad)
    kind = pts.kind
    Ch = plan.C
    total, GV, GF = pair_pass(U, V, ckind, F, plan.comps, need_grad, block_size,
                              backend=backend, n_threads=n_threads)
    if not need_grad:
        return total, None
    # back to the original v and m
    if Ch is not None:
        GV = GV @ Cx.T
        GF = xp.matmul(GF, Cx.T[None, ...])
    if ckind == "full" and not plan.wh.identity:
        GF = xp.matmul(plan.wh.LinvT[None, ...], GF)
    p = theta.size
    grad = xp.sum(xp.reshape(GV[:, :, None] * pts.dv, (-1, p)), axis=0)
    if pts.dm is not None:
        if kind == "scalar":
            Gm = xp.sum(xp.reshape(GF, (n, -1)), axis=1) if ckind == "diag" else batch_trace(xp, GF)
            grad = grad + xp.sum(Gm[:, None] * pts.dm, axis=0)
        elif kind == "diag":
            Gm = GF if ckind == "diag" else batch_diagonal(xp, GF)
            grad = grad + xp.sum(xp.reshape(Gm[:, :, None] * pts.dm, (-1, p)), axis=0)
        else:
            grad = grad + xp.sum(xp.reshape(GF[:, :, :, None] * pts.dm, (-1, p)), axis=0)
    return total, aa.to_host(grad)



def ksd_kernel_matrix(model, X, theta, kernel, n_threads=None) -> KernelMatrix:
    """The Stein kernel matrix of stein_coreset.kernels at (X, score(X, theta))."""
    if kernel is None:
        kernel = SteinKernel()
    elif isinstance(kernel, RadialKernel):
        kernel = SteinKernel(kernel)
    elif not isinstance(kernel, SteinKernel):
        raise TypeError(
            "for discrepancy='ksd' the kernel must be a base kernel or a SteinKernel "
            f"(K = I k); got {type(kernel).__name__}; use discrepancy='dksd' for matrix kernels"
        )
    return kernel.bind(X, checked_scores(model, X, theta), n_threads=n_threads)


def ksd_value(K: KernelMatrix) -> float:
    """U-statistic (1^T K 1 - tr K) / (n (n - 1)) from the compression code's KernelMatrix."""
    xp = K.xp
    n = K.n
    ones = xp.ones((n,), dtype=xp.float64, device=K.device)
    b = block_rows(n, None, xp)
    total = float(xp.sum(K.matvec(ones, block_size=b)))  # = K.quad(1)
    return (total - float(xp.sum(K.diag()))) / (n * (n - 1))



def information(model, X, theta, kernel, H, block_size=None):
    """The kernel information tensor (Eq. 14), V-statistic (1/n^2) sum_{a,b} H_a^T K H_b with
    H = m^T d/dtheta grad_x log p of shape (n, d, p); host (p, p), PSD. Cost O(n^2 d p)."""
    xp, dev = aa.namespace(X=X)
    n, d = int(X.shape[0]), int(X.shape[1])
    p = int(H.shape[2])
    plan = kernel_plan(kernel, X, xp, dev)
    if plan.C is not None:
        H = xp.matmul(aa.from_host(plan.C.T, xp=xp, device=dev)[None, ...], H)
    U = plan.wh.points(X)
    b = block_rows(n, block_size, xp)
    g = xp.zeros((p, p), dtype=xp.float64, device=dev)
    for a0 in range(0, n, b):
        a1 = min(n, a0 + b)
        q = squared_distances(xp, U[a0:a1, ...], U)
        cache = {}
        for r in range(d):
            base, lam = plan.comps[r]
            if id(base) not in cache:
                cache[id(base)] = base.radial(xp, q)[0]
            Hr = H[:, r, :]
            g = g + lam * (Hr[a0:a1, ...].T @ (cache[id(base)] @ Hr))
    g = g / (n * n)
    g = 0.5 * (g + g.T)
    return aa.to_host(g)

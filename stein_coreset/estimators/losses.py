"""Minimum Stein discrepancy losses: DKSD / KSD (U-statistics), SM, DSM, NNSM, and their gradients.

DKSD (Barp et al., 2019, Thm. 1, Eq. 6-7, App. B.3). For a matrix kernel K and a diffusion matrix
m, write v(x) = m(x)^T grad log p(x) + div m(x), with (div m)_r = sum_i d_i m_ir. Expanding
Eq. 6 (App. B.3, Eq. 88-92) gives

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

Cost: one blocked pass over (block x n) slabs, O(n^2 d) for scalar or diagonal m and K = I k or
diag(lambda_i k_i), O(n^2 d^2) for a full m (or dense B, or a preconditioner M); memory
O(block n), never n x n x d. The gradient in theta comes from the same pass: the pass returns
dL/dv_i and dL/dm_i (reverse mode by hand, using the symmetry of k0), then the chain rule with
the per-point Jacobians dv_i/dtheta, dm_i/dtheta (model ``score_dtheta``; central differences
of the O(n) per-point maps when a derivative is missing).

SM (Eq. 8): mean(Laplacian log p + ||grad log p||^2 / 2). DSM (Eq. 11, App. B.6.2):
mean(||m^T grad log p||^2 + 2 <div(m m^T), grad log p> + 2 Tr[m m^T Hess log p]), so
DSM with m = I is 2 SM. NNSM is DSM with m(x) = diag(x_i) (Sec. 2.2; the non-negative score
matching choice h_i(x_i) = x_i^2, as in Sec. 4.2). Their theta-gradients are central differences
of the O(n d^2) loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from ..engine import SLAB_ENTRIES, KernelMatrix, Whitening
from ..kernels import IMQ, RadialKernel, SteinKernel, median_bandwidth
from . import models as _models

__all__ = [
    "SeparableKernel",
    "DiagonalKernel",
    "Diffusion",
    "loss",
    "loss_and_grad",
    "information",
    "DISCREPANCIES",
]

DISCREPANCIES = ("ksd", "dksd", "sm", "dsm", "nnsm")
_KERNEL_BASED = ("ksd", "dksd")


# ---------------------------------------------------------------------------------------------
# Matrix kernels
# ---------------------------------------------------------------------------------------------
class SeparableKernel:
    """Matrix kernel K(x, y) = B k(x, y) (Sec. 2.1 (ii)); B symmetric positive definite.

    ``base=None`` uses IMQ with the median bandwidth of the data; ``B=None`` is the identity.
    """

    def __init__(self, base: RadialKernel | None = None, B=None):
        if base is not None and not isinstance(base, RadialKernel):
            raise TypeError(f"base must be IMQ, Gaussian or Matern, got {type(base).__name__}")
        self.base = base
        self.B = None if B is None else np.asarray(B, dtype=np.float64)

    def __repr__(self):
        return f"SeparableKernel(base={self.base!r}, B={'I' if self.B is None else 'given'})"


class DiagonalKernel:
    """Matrix kernel K = diag(lambda_1 k_1, ..., lambda_d k_d) (Sec. 2.1 (i)), lambda_i > 0.

    ``bases`` is one base kernel (shared) or a sequence of d of them.
    """

    def __init__(self, bases, lambdas=None):
        seq = list(bases) if isinstance(bases, (list, tuple)) else [bases]
        for b in seq:
            if not isinstance(b, RadialKernel):
                raise TypeError(f"bases must be IMQ, Gaussian or Matern, got {type(b).__name__}")
        self.bases = seq
        self.lambdas = None if lambdas is None else np.asarray(lambdas, dtype=np.float64)
        if self.lambdas is not None and (
            self.lambdas.ndim != 1 or not np.all(np.isfinite(self.lambdas))
            or np.any(self.lambdas <= 0)
        ):
            raise ValueError(f"lambdas must be a vector of positive numbers, got {lambdas}")

    def __repr__(self):
        return f"DiagonalKernel(bases={self.bases!r}, lambdas={self.lambdas})"


@dataclass
class _KernelPlan:
    comps: list  # per component r: (base kernel, lambda_r)
    C: np.ndarray | None  # K = C C^T k
    wh: Whitening
    full: bool  # C or M force a full diffusion matrix


def _plan(kernel, X, xp, dev) -> _KernelPlan:
    d = int(X.shape[1])
    M, C = None, None
    if kernel is None:
        base = IMQ(sigma=median_bandwidth(X))
        comps = [(base, 1.0)] * d
    elif isinstance(kernel, RadialKernel):
        comps = [(kernel, 1.0)] * d
    elif isinstance(kernel, SteinKernel):
        # the preconditioned Stein kernel of kernels.py (Prop. B.3): K = M k with k radial in
        # the M-norm, so that m = I reproduces SteinKernel(base, M) exactly
        base = kernel.resolve(X).base
        M = kernel.M
        comps = [(base, 1.0)] * d
        if M is not None:
            C = Whitening(M, d, xp, dev).L
            C = aa.to_host(C)
    elif isinstance(kernel, SeparableKernel):
        base = kernel.base or IMQ(sigma=median_bandwidth(X))
        comps = [(base, 1.0)] * d
        if kernel.B is not None:
            B = kernel.B
            if B.shape != (d, d):
                raise ValueError(f"kernel B must have shape ({d}, {d}), got {B.shape}")
            if not np.allclose(B, B.T, rtol=1e-10, atol=1e-12 * np.abs(B).max()):
                raise ValueError("kernel B must be symmetric positive definite; not symmetric")
            try:
                C = np.linalg.cholesky(B)
            except np.linalg.LinAlgError:
                raise ValueError("kernel B must be symmetric positive definite") from None
            if np.count_nonzero(B - np.diag(np.diag(B))) == 0:
                comps = [(base, float(B[r, r])) for r in range(d)]
                C = None
    elif isinstance(kernel, DiagonalKernel):
        bases = kernel.bases * d if len(kernel.bases) == 1 else kernel.bases
        if len(bases) != d:
            raise ValueError(f"DiagonalKernel needs 1 or d = {d} base kernels, got {len(bases)}")
        lam = np.ones(d) if kernel.lambdas is None else kernel.lambdas
        if lam.size != d:
            raise ValueError(f"DiagonalKernel needs d = {d} lambdas, got {lam.size}")
        comps = [(bases[r], float(lam[r])) for r in range(d)]
    else:
        raise TypeError(
            "kernel must be a base kernel (IMQ, Gaussian, Matern), a SteinKernel, a "
            f"SeparableKernel or a DiagonalKernel, got {type(kernel).__name__}"
        )
    wh = Whitening(M, d, xp, dev)
    return _KernelPlan(comps, C, wh, full=(C is not None or M is not None))


# ---------------------------------------------------------------------------------------------
# Diffusion matrices
# ---------------------------------------------------------------------------------------------
def _unit(xp, d, j, dev):
    return xp.astype(xp.arange(d, device=dev)[None, :] == j, xp.float64)


def _kind_of(m, n, d):
    shape = tuple(m.shape)
    if shape == (n,):
        return "scalar"
    if shape == (n, d):
        return "diag"
    if shape == (n, d, d):
        return "full"
    raise ValueError(
        f"diffusion must return shape (n,) (scalar), (n, d) (diagonal) or (n, d, d) (full) "
        f"with n = {n}, d = {d}; got {shape}"
    )


def _divergence(xp, fn, x, kind):
    """(div A)_r = sum_i d_i A_ir of a matrix field given in ``kind`` form, central differences."""
    n, d = x.shape
    dev = aa.device_of(x)
    cols = []
    for j in range(d):
        h = _models._FD_X * (1.0 + xp.abs(x[:, j]))
        step = h[:, None] * _unit(xp, d, j, dev)
        dm = (fn(x + step) - fn(x - step))
        shape = (n,) + (1,) * (dm.ndim - 1)
        dm = dm / (2.0 * xp.reshape(h, shape))  # d_j of the field
        if kind == "scalar":  # A = f I: (div A)_r = d_r f, so column j goes to r = j
            cols.append(dm[:, None] * _unit(xp, d, j, dev))
        elif kind == "diag":  # A = diag(f): (div A)_r = d_r f_r
            cols.append(dm[:, j : j + 1] * _unit(xp, d, j, dev))
        else:  # (div A)_r gets d_j A_jr
            cols.append(dm[:, j, :])
    out = cols[0]
    for c in cols[1:]:
        out = out + c
    return out


class Diffusion:
    """A diffusion matrix field m(x, theta) (Sec. 2) with the derivatives the losses need.

    Parameters
    ----------
    m : callable (x, theta) -> array
        Shape (n,) for a scalar m(x) I, (n, d) for diag(m(x)), (n, d, d) for a full matrix.
    divergence : callable (x, theta) -> (n, d), optional
        (div m)_r = sum_i d m_ir / d x_i (needed by DKSD); central differences otherwise.
    div_mmT : callable (x, theta) -> (n, d), optional
        div(m m^T) (needed by DSM); central differences otherwise.
    theta_dependent : bool, optional
        Whether m depends on theta (DKSD allows it, DSM does not). ``None``: detected by
        evaluating m at a perturbed theta. theta-derivatives are central differences.
    """

    def __init__(self, m, *, divergence=None, div_mmT=None, theta_dependent=None):
        if not callable(m):
            raise TypeError(f"diffusion must be callable m(x, theta), got {type(m).__name__}")
        self.m = m
        self._divergence = divergence
        self._div_mmT = div_mmT
        self.theta_dependent = theta_dependent

    def __repr__(self):
        return f"Diffusion({getattr(self.m, '__name__', 'm')})"

    def value(self, x, theta):
        xp, _ = aa.namespace(x=x)
        n, d = x.shape
        try:
            out = self.m(x, theta)
        except Exception as e:
            raise ValueError(f"diffusion m(x, theta) failed: {type(e).__name__}: {e}") from e
        if not hasattr(out, "shape"):
            raise TypeError(f"diffusion must return an array, got {type(out).__name__}")
        kind = _kind_of(out, n, d)
        out = xp.astype(out, xp.float64) if out.dtype != xp.float64 else out
        if not bool(xp.all(xp.isfinite(out))):
            bad = int(xp.sum(xp.astype(~xp.isfinite(xp.reshape(out, (n, -1))), xp.int64)))
            raise ValueError(f"diffusion returned NaN or inf ({bad} entries)")
        return kind, out

    def divergence(self, x, theta, kind):
        xp, _ = aa.namespace(x=x)
        if self._divergence is not None:
            return self._divergence(x, theta)
        return _divergence(xp, lambda z: self.m(z, theta), x, kind)

    def div_mmT(self, x, theta, kind):
        xp, _ = aa.namespace(x=x)
        if self._div_mmT is not None:
            return self._div_mmT(x, theta)

        def mmT(z):
            mz = self.m(z, theta)
            return mz @ xp.permute_dims(mz, (0, 2, 1)) if kind == "full" else mz * mz

        return _divergence(xp, mmT, x, kind)

    def is_theta_dependent(self, x, theta) -> bool:
        if self.theta_dependent is None:
            xs = x[: min(int(x.shape[0]), 16), ...]
            t = np.asarray(theta, dtype=np.float64)
            xp, _ = aa.namespace(x=x)
            a = self.m(xs, t)
            b = self.m(xs, t + 1e-3 * np.maximum(1.0, np.abs(t)))
            self.theta_dependent = not bool(xp.all(a == b))
        return bool(self.theta_dependent)


def _nn_diffusion() -> Diffusion:
    """m(x) = diag(x) (NNSM, Sec. 2.2 with h_i(x_i) = x_i^2): div m = 1, div(m m^T) = 2 x."""
    return Diffusion(
        lambda x, theta: x,
        divergence=lambda x, theta: aa.namespace(x=x)[0].ones_like(x),
        div_mmT=lambda x, theta: 2.0 * x,
        theta_dependent=False,
    )


def _as_diffusion(diffusion):
    if diffusion is None or isinstance(diffusion, Diffusion):
        return diffusion
    if callable(diffusion):
        return Diffusion(diffusion)
    raise TypeError(
        f"diffusion must be None, a callable m(x, theta) or a Diffusion, got "
        f"{type(diffusion).__name__}"
    )


# ---------------------------------------------------------------------------------------------
# Per-point quantities
# ---------------------------------------------------------------------------------------------
def _scores(model, X, theta):
    xp, _ = aa.namespace(X=X)
    S = model.score(X, theta)
    if tuple(S.shape) != tuple(X.shape):
        raise ValueError(f"model.score must return shape {tuple(X.shape)}, got {tuple(S.shape)}")
    bad = int(xp.sum(xp.astype(val.nonfinite_rows(xp, S), xp.int64)))
    if bad:
        raise ValueError(
            f"model.score returned NaN or inf at {bad} of {X.shape[0]} points for theta = {theta}"
        )
    return S


def _mT(xp, kind, m, A):
    """m^T A for A of shape (n, d) or (n, d, p)."""
    if kind == "identity":
        return A
    if kind == "scalar":
        return m[:, None] * A if A.ndim == 2 else m[:, None, None] * A
    if kind == "diag":
        return m * A if A.ndim == 2 else m[:, :, None] * A
    mt = xp.permute_dims(m, (0, 2, 1))
    return xp.matmul(mt, A[:, :, None])[:, :, 0] if A.ndim == 2 else xp.matmul(mt, A)


@dataclass
class _Points:
    kind: str  # identity | scalar | diag | full
    m: object  # None, (n,), (n, d), (n, d, d)
    v: object  # (n, d): m^T s + div m
    dv: object = None  # (n, d, p)
    dm: object = None  # (n, ..., p) or None when m does not depend on theta


def _fd_theta(f, theta):
    """Central differences of an array-valued map of theta, stacked on a new last axis."""
    theta = np.asarray(theta, dtype=np.float64)
    h = 1e-4 * np.maximum(1.0, np.abs(theta))
    out = []
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h[j]
        out.append((f(theta + e) - f(theta - e)) / (2.0 * float(h[j])))
    xp, _ = aa.namespace(a=out[0])
    return xp.stack(out, axis=-1)


def _points(model, X, theta, diff, need_grad) -> _Points:
    xp, _ = aa.namespace(X=X)
    S = _scores(model, X, theta)
    if diff is None:
        kind, m, div = "identity", None, None
        v = S
    else:
        kind, m = diff.value(X, theta)
        div = diff.divergence(X, theta, kind)
        if tuple(div.shape) != tuple(X.shape):
            raise ValueError(f"diffusion divergence must have shape {tuple(X.shape)}")
        v = _mT(xp, kind, m, S) + div
    pts = _Points(kind, m, v)
    if need_grad:
        J = _models.score_dtheta(model, X, theta)
        p = theta.size
        if tuple(J.shape) != (X.shape[0], X.shape[1], p):
            raise ValueError(
                f"model.score_dtheta must return shape {(X.shape[0], X.shape[1], p)}, "
                f"got {tuple(J.shape)}"
            )
        dv = _mT(xp, kind, m, J)
        if diff is not None and diff.is_theta_dependent(X, theta):
            dm = _fd_theta(lambda t: diff.value(X, t)[1], theta)
            ddiv = _fd_theta(lambda t: diff.divergence(X, t, kind), theta)
            if kind == "scalar":
                dmTs = dm[:, None, :] * S[:, :, None]
            elif kind == "diag":
                dmTs = dm * S[:, :, None]
            else:
                dmTs = xp.sum(dm * S[:, :, None, None], axis=1)
            dv = dv + dmTs + ddiv
            pts.dm = dm
        pts.dv = dv
    return pts


# ---------------------------------------------------------------------------------------------
# The blocked pair pass
# ---------------------------------------------------------------------------------------------
def _pair_sqdist(xp, Ua, Ub):
    """Squared distances formed coordinate by coordinate, as KernelMatrix does (no cancellation
    of the |a|^2 + |b|^2 - 2 a.b expansion near the diagonal)."""
    q = None
    for c in range(int(Ua.shape[1])):
        du = Ua[:, c : c + 1] - Ub[None, :, c]
        q = du * du if q is None else q + du * du
    return q


#: Entries of one (block x n) slab on the host: small enough to stay in cache (measured ~5x
#: faster than 4M-entry slabs with NumPy at n = 1000); accelerators get SLAB_ENTRIES // 4.
HOST_SLAB_ENTRIES = 1 << 16


def _block_rows(n: int, block_size: int | None, xp=None) -> int:
    if block_size:
        return int(block_size)
    entries = HOST_SLAB_ENTRIES if xp is None or aa.is_numpy(xp) else SLAB_ENTRIES // 4
    return max(1, entries // max(n, 1))


def _pair_pass_shared_diag(U, V, F, base, lam, need_grad, block_size=None):
    """:func:`_pair_pass` for one shared base kernel and a diagonal F, as matrix products.

    Summing the per-component terms over r first turns them into (block x n) @ (n x d) and
    (block x d) @ (d x n) products (O(n^2 d) flops in BLAS) and leaves O(1) elementwise work per
    pair, instead of O(d) per pair in the component loop.
    """
    xp, dev = aa.namespace(U=U)
    n = int(U.shape[0])
    c = 1.0 / (n * (n - 1))
    b = _block_rows(n, block_size, xp)
    lam = aa.from_host(np.asarray(lam, dtype=np.float64), xp=xp, device=dev)[None, :]
    d = int(U.shape[1])
    FU, FU2, UV = F * U, F * U * U, U * V
    LV, LF = lam * V, lam * F
    # sum_r of the component terms as three products (left (n, k d) x right (n, k d)^T):
    #   G0 = sum_r lam v_a v_b, G1 = sum_r lam (v_a Q - P v_b + R), G2 = sum_r lam P Q
    L1 = xp.concat([LV * U, -LV, -LF * U, LF, LF], axis=1)
    R1 = xp.concat([F, FU, V, UV, F], axis=1)
    L2 = xp.concat([LF * U * U, -2.0 * LF * U, LF], axis=1)
    R2 = xp.concat([F, FU, FU2], axis=1)
    Rg1 = xp.concat([F, FU, V, UV], axis=1)
    cols = xp.arange(n, device=dev)
    total = 0.0
    gv_parts, gf_parts = [], []
    for a0 in range(0, n, b):
        a1 = min(n, a0 + b)
        Ua = U[a0:a1, ...]
        q = _pair_sqdist(xp, Ua, U)
        rows = xp.arange(a0, a1, device=dev)
        W = c * xp.astype(rows[:, None] != cols[None, :], xp.float64)
        qpos = q > 0.0
        k0, k1, qk2 = base.radial(xp, q)
        k2 = xp.where(qpos, qk2 / xp.where(qpos, q, 1.0), 0.0)
        T = (k0 * (LV[a0:a1, ...] @ V.T) - 2.0 * k1 * (L1[a0:a1, ...] @ R1.T)
             - 4.0 * k2 * (L2[a0:a1, ...] @ R2.T))
        total += float(xp.sum(W * T))
        if need_grad:
            A1 = W * k1
            g1 = A1 @ Rg1  # [A1 F, A1 FU, A1 V, A1 UV]
            g2 = (W * k2) @ R2  # [A2 F, A2 FU, A2 FU2]
            A1F, A1FU, A1V, A1UV = (g1[:, i * d : (i + 1) * d] for i in range(4))
            A2F, A2FU, A2FU2 = (g2[:, i * d : (i + 1) * d] for i in range(3))
            gv = (W * k0) @ V - 2.0 * Ua * A1F + 2.0 * A1FU
            gf = (2.0 * (Ua * A1V - A1UV)
                  - 4.0 * (Ua * Ua * A2F - 2.0 * Ua * A2FU + A2FU2)
                  - 2.0 * A1F)
            gv_parts.append(2.0 * lam * gv)
            gf_parts.append(2.0 * lam * gf)
    if not need_grad:
        return total, None, None
    return total, xp.concat(gv_parts, axis=0), xp.concat(gf_parts, axis=0)


BACKENDS = ("auto", "cpp", "array_api")


def _pair_pass_cpp(U, V, kind, F, comps, need_grad):
    """The pass in C++ (src_cpp/dksd.hpp, OpenMP over rows) on host copies, one transfer each
    way (a no-op for NumPy)."""
    from ..algorithms._native import dksd_pass

    xp, dev = aa.namespace(U=U)
    Fh = np.ascontiguousarray(aa.to_host(F).reshape(-1))
    total, Gv, Gf = dksd_pass(
        aa.to_host(U), aa.to_host(V), Fh, kind == "full",
        np.asarray([int(b.code) for b, _ in comps], dtype=np.intc),
        np.asarray([float(b.sigma) for b, _ in comps]),
        np.asarray([float(b.beta) for b, _ in comps]),
        np.asarray([float(lam) for _, lam in comps]),
        bool(need_grad),
        1,
    )
    if not need_grad:
        return total, None, None
    return total, aa.from_host(Gv, xp=xp, device=dev), aa.from_host(Gf, xp=xp, device=dev)


def _pair_pass(U, V, kind, F, comps, need_grad, block_size=None, vectorise=True,
               backend="auto"):
    """U-statistic sum_{i != j} k0(x_i, x_j) / (n (n - 1)) in canonical form, and its adjoints.

    U: (n, d) whitened points; V: (n, d) transformed v; kind "diag" (F (n, d)) or "full"
    (F (n, d, d)); comps: per-component (base, lambda). Returns (loss, G_V, G_F).
    ``backend``: "auto" runs NumPy inputs in C++ and other namespaces through the array API
    (blocked); "array_api" forces the latter (the reference the C++ pass is tested against).
    """
    xp, _ = aa.namespace(U=U)
    if backend == "cpp" or (backend == "auto" and aa.is_numpy(xp)):
        return _pair_pass_cpp(U, V, kind, F, comps, need_grad)
    if vectorise and kind == "diag" and len({id(base) for base, _ in comps}) == 1:
        return _pair_pass_shared_diag(U, V, F, comps[0][0], [lam for _, lam in comps],
                                      need_grad, block_size)
    xp, dev = aa.namespace(U=U)
    n, d = int(U.shape[0]), int(U.shape[1])
    c = 1.0 / (n * (n - 1))
    b = _block_rows(n, block_size, xp)
    total = 0.0
    gv_parts, gf_parts = [], []
    cols = xp.arange(n, device=dev)
    if kind == "full":
        Mcols = [F[:, :, r] for r in range(d)]
        zs = [xp.sum(Mr * U, axis=1) for Mr in Mcols]
    for a0 in range(0, n, b):
        a1 = min(n, a0 + b)
        Ua = U[a0:a1, ...]
        q = _pair_sqdist(xp, Ua, U)
        rows = xp.arange(a0, a1, device=dev)
        W = c * xp.astype(rows[:, None] != cols[None, :], xp.float64)
        qpos = q > 0.0
        qsafe = xp.where(qpos, q, 1.0)
        cache = {}
        gv_cols, gf_cols = [], []
        for r in range(d):
            base, lam = comps[r]
            key = id(base)
            if key not in cache:
                k0, k1, qk2 = base.radial(xp, q)
                cache[key] = (k0, k1, xp.where(qpos, qk2 / qsafe, 0.0))
            k0, k1, k2 = cache[key]
            if kind == "diag":
                dr = Ua[:, r : r + 1] - U[None, :, r]
                fa = F[a0:a1, r : r + 1]
                fb = F[None, :, r]
                P, Q, R = fa * dr, fb * dr, fa * fb
            else:
                Mr = Mcols[r]
                P = zs[r][a0:a1, None] - Mr[a0:a1, ...] @ U.T
                Q = Ua @ Mr.T - zs[r][None, :]
                R = Mr[a0:a1, ...] @ Mr.T
            va = V[a0:a1, r : r + 1]
            vb = V[None, :, r]
            T = k0 * va * vb - 2.0 * k1 * (va * Q - P * vb + R) - 4.0 * k2 * P * Q
            total += lam * float(xp.sum(W * T))
            if need_grad:
                g = 2.0 * lam
                gv_cols.append(g * xp.sum(W * (k0 * vb - 2.0 * k1 * Q), axis=1))
                AP = W * (2.0 * k1 * vb - 4.0 * k2 * Q)
                AR = -2.0 * k1 * W
                if kind == "diag":
                    gf_cols.append(g * (xp.sum(AP * dr, axis=1) + AR @ F[:, r]))
                else:
                    gf_cols.append(g * (Ua * xp.sum(AP, axis=1)[:, None] - AP @ U + AR @ Mr))
        if need_grad:
            gv_parts.append(xp.stack(gv_cols, axis=1))
            gf_parts.append(xp.stack(gf_cols, axis=1 if kind == "diag" else 2))
    if not need_grad:
        return total, None, None
    return total, xp.concat(gv_parts, axis=0), xp.concat(gf_parts, axis=0)


def _dksd(model, X, theta, kernel, diff, need_grad, block_size=None, backend="auto"):
    """DKSD^2 U-statistic (Eq. 7) and optionally its theta-gradient (host (p,))."""
    xp, dev = aa.namespace(X=X)
    n, d = int(X.shape[0]), int(X.shape[1])
    plan = _plan(kernel, X, xp, dev)
    pts = _points(model, X, theta, diff, need_grad)
    U = plan.wh.points(X)
    kind, m = pts.kind, pts.m
    V = pts.v
    Ch = plan.C
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
    total, GV, GF = _pair_pass(U, V, ckind, F, plan.comps, need_grad, block_size,
                               backend=backend)
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
            Gm = xp.sum(xp.reshape(GF, (n, -1)), axis=1) if ckind == "diag" else _trace(xp, GF)
            grad = grad + xp.sum(Gm[:, None] * pts.dm, axis=0)
        elif kind == "diag":
            Gm = GF if ckind == "diag" else _diagonal(xp, GF)
            grad = grad + xp.sum(xp.reshape(Gm[:, :, None] * pts.dm, (-1, p)), axis=0)
        else:
            grad = grad + xp.sum(xp.reshape(GF[:, :, :, None] * pts.dm, (-1, p)), axis=0)
    return total, aa.to_host(grad)


def _diagonal(xp, A):
    d = A.shape[-1]
    eye = xp.eye(d, dtype=xp.float64, device=aa.device_of(A))
    return xp.sum(A * eye[None, ...], axis=2)


def _trace(xp, A):
    return xp.sum(_diagonal(xp, A), axis=1)


def _ksd_kernel_matrix(model, X, theta, kernel) -> KernelMatrix:
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
    return kernel.bind(X, _scores(model, X, theta))


def _ksd_value(K: KernelMatrix) -> float:
    """U-statistic (1^T K 1 - tr K) / (n (n - 1)) from the compression code's KernelMatrix."""
    xp = K.xp
    n = K.n
    ones = xp.ones((n,), dtype=xp.float64, device=K.device)
    total = float(xp.sum(K.matvec(ones, block_size=_block_rows(n, None, xp))))  # = K.quad(1)
    return (total - float(xp.sum(K.diag()))) / (n * (n - 1))


# ---------------------------------------------------------------------------------------------
# Score matching family
# ---------------------------------------------------------------------------------------------
def _dsm_value(model, X, theta, diff) -> float:
    xp, _ = aa.namespace(X=X)
    S = _scores(model, X, theta)
    H = _models.score_dx(model, X, theta)
    n, d = X.shape
    if tuple(H.shape) != (n, d, d):
        raise ValueError(f"model.score_dx must return shape {(n, d, d)}, got {tuple(H.shape)}")
    if diff is None:
        val = xp.sum(S * S, axis=1) + 2.0 * _trace(xp, H)
    else:
        kind, m = diff.value(X, theta)
        dmm = diff.div_mmT(X, theta, kind)
        if kind == "scalar":
            ms2 = m * m * xp.sum(S * S, axis=1)
            tr = m * m * _trace(xp, H)
        elif kind == "diag":
            ms2 = xp.sum((m * S) ** 2, axis=1)
            tr = xp.sum(m * m * _diagonal(xp, H), axis=1)
        else:
            mts = _mT(xp, kind, m, S)
            ms2 = xp.sum(mts * mts, axis=1)
            A = m @ xp.permute_dims(m, (0, 2, 1))
            tr = xp.sum(xp.reshape(A * H, (n, -1)), axis=1)
        val = ms2 + 2.0 * (xp.sum(dmm * S, axis=1) + tr)
    return float(xp.mean(val))


def _value(model, X, theta, discrepancy, kernel, diff, block_size=None, backend="auto"):
    if discrepancy == "ksd":
        if block_size is None and backend == "auto":
            return _ksd_value(_ksd_kernel_matrix(model, X, theta, kernel))
        return _dksd(model, X, theta, kernel, None, False, block_size, backend)[0]
    if discrepancy == "dksd":
        return _dksd(model, X, theta, kernel, diff, False, block_size, backend)[0]
    if discrepancy == "sm":
        return 0.5 * _dsm_value(model, X, theta, None)
    if discrepancy == "dsm":
        return _dsm_value(model, X, theta, diff)
    return _dsm_value(model, X, theta, diff if diff is not None else _nn_diffusion())


def _fd_grad(f, theta):
    """Central differences of a scalar loss in theta (2 p evaluations)."""
    h = 1e-6 * np.maximum(1.0, np.abs(theta))
    g = np.empty_like(theta)
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h[j]
        g[j] = (f(theta + e) - f(theta - e)) / (2.0 * float(h[j]))
    return g


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------
def check_model_dimension(model, X) -> None:
    """X must have the model's ``d`` columns (when the model says how many)."""
    md = getattr(model, "d", None)
    if md is not None and X.shape[1] != md:
        raise ValueError(f"X must have {md} columns for {model!r}, got shape {tuple(X.shape)}")


def _check_block_size(block_size):
    return None if block_size is None else val.check_int(block_size, "block_size", lo=1)


def _finite_result(discrepancy, theta, what, call):
    """``call()``, with overflow in a model's Python-float arithmetic and a non-finite result
    turned into a ValueError naming theta (before: a raw ZeroDivisionError, or a NaN gradient
    returned as if it were one)."""
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = call()
    except (OverflowError, ZeroDivisionError, FloatingPointError) as e:
        raise ValueError(
            f"theta: the {discrepancy} {what} overflowed at theta = {theta} "
            f"({type(e).__name__}: {e}); theta is far from the scale of X"
        ) from None
    parts = out if isinstance(out, tuple) else (out,)
    if not all(np.all(np.isfinite(np.asarray(aa.to_host(v) if not isinstance(v, float) else v)))
               for v in parts):
        raise ValueError(
            f"theta: the {discrepancy} {what} is not finite at theta = {theta}; theta is far "
            "from the scale of X (or the model's score overflows there)"
        )
    return out


def _validate(model, theta, X, discrepancy, kernel, diffusion, theta_name="theta"):
    if not callable(getattr(model, "score", None)):
        raise TypeError(f"model must have a score(x, theta) method, got {type(model).__name__}")
    if not isinstance(discrepancy, str) or discrepancy not in DISCREPANCIES:
        raise ValueError(
            f"unknown discrepancy {discrepancy!r}; choose one of {', '.join(DISCREPANCIES)}"
        )
    xp, _ = aa.namespace(X=X)
    X = val.check_points(X, xp, "X")
    check_model_dimension(model, X)
    if discrepancy in _KERNEL_BASED and X.shape[0] < 2:
        raise ValueError("the U-statistic losses need at least 2 points in X")
    theta = _models.check_theta(model, theta, theta_name)
    diff = _as_diffusion(diffusion)
    if discrepancy == "ksd" and diff is not None:
        raise ValueError("discrepancy='ksd' has m = I; give the diffusion to discrepancy='dksd'")
    if discrepancy == "sm" and diff is not None:
        raise ValueError("discrepancy='sm' has m = I; give the diffusion to discrepancy='dsm'")
    if discrepancy in ("dsm", "nnsm") and diff is not None and diff.is_theta_dependent(X, theta):
        raise ValueError(
            "DSM needs a diffusion m(x) that does not depend on theta (Sec. 2.2); "
            "use discrepancy='dksd' for a theta-dependent m"
        )
    if discrepancy not in _KERNEL_BASED and kernel is not None:
        raise ValueError(f"discrepancy={discrepancy!r} takes no kernel")
    return X, theta, diff


def loss(model, theta, X, *, discrepancy="ksd", kernel=None, diffusion=None,
         block_size=None, backend="auto") -> float:
    """The estimated Stein discrepancy of the sample X to p_theta (the quantity fit() minimises).

    Parameters
    ----------
    model : model object
        Has ``score(x, theta)`` (see :mod:`stein_coreset.estimators.models`).
    theta : (p,) array-like
        Parameters (host).
    X : (n, d) array
        Sample, any array-API namespace.
    discrepancy : {"ksd", "dksd", "sm", "dsm", "nnsm"}
        "ksd": U-statistic KSD^2 with K = I k (Eq. 7 with m = I), evaluated by
        :class:`stein_coreset.engine.KernelMatrix`; "dksd": Eq. 7 with a diffusion m and a
        matrix kernel; "sm": Eq. 8 estimator; "dsm": Eq. 11; "nnsm": DSM with m = diag(x).
    kernel : base kernel, SteinKernel, SeparableKernel or DiagonalKernel, optional
        For ksd / dksd; default IMQ(beta=-1/2) with the median bandwidth of X. A base kernel k
        means K = I k; ``SteinKernel(base, M)`` means K = M k_M with k_M radial in the M-norm,
        which with m = I is exactly the preconditioned Stein kernel of
        :class:`stein_coreset.SteinKernel` (Prop. B.3 of the compression paper).
    diffusion : callable m(x, theta) or Diffusion, optional
        (n,), (n, d) or (n, d, d) per point (scalar, diagonal, full); default m = I.
    block_size : int, optional
        Rows per slab of the blocked (array-API) pair pass.
    backend : {"auto", "cpp", "array_api"}
        ksd / dksd pair pass: "auto" runs NumPy input in C++ (src_cpp/dksd.hpp) and every
        other namespace through the blocked array-API code; "array_api" forces the latter.
        (``"ksd"`` values go through :class:`~stein_coreset.engine.KernelMatrix` under "auto".)

    Returns
    -------
    float. Cost: O(n^2 d) (ksd, dksd with scalar/diagonal m), O(n^2 d^2) (full m); O(n d^2)
    for sm / dsm / nnsm.
    """
    X, theta, diff = _validate(model, theta, X, discrepancy, kernel, diffusion)
    _check_backend(backend)
    block_size = _check_block_size(block_size)
    return _finite_result(discrepancy, theta, "loss", lambda: _value(
        model, X, theta, discrepancy, kernel, diff, block_size, backend))


def _check_backend(backend):
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")


def loss_and_grad(model, theta, X, *, discrepancy="ksd", kernel=None, diffusion=None,
                  gradient="analytic", block_size=None, backend="auto"):
    """Loss and its theta-gradient, ``(float, (p,) numpy array)``.

    ``gradient="analytic"`` (ksd / dksd): one blocked pass gives dL/dv_i and dL/dm_i, chained
    with the model's ``score_dtheta`` (central differences of the score, O(n p), if missing).
    ``gradient="fd"``, and always for sm / dsm / nnsm: central differences of the loss
    (2 p evaluations). Same arguments as :func:`loss`.
    """
    X, theta, diff = _validate(model, theta, X, discrepancy, kernel, diffusion)
    if gradient not in ("analytic", "fd"):
        raise ValueError(f"gradient must be 'analytic' or 'fd', got {gradient!r}")
    _check_backend(backend)
    block_size = _check_block_size(block_size)
    if gradient == "analytic" and discrepancy in _KERNEL_BASED:
        return _finite_result(discrepancy, theta, "loss or its gradient", lambda: _dksd(
            model, X, theta, kernel, diff, True, block_size, backend))
    f = lambda t: _value(model, X, t, discrepancy, kernel, diff, block_size, backend)  # noqa: E731
    return _finite_result(discrepancy, theta, "loss or its gradient",
                          lambda: (f(theta), _fd_grad(f, theta)))


def information(model, theta, X, *, discrepancy="ksd", kernel=None, diffusion=None,
                block_size=None) -> np.ndarray:
    """Information tensor g(theta) (Props. 3-4) estimated on the sample X, (p, p), PSD.

    DKSD / KSD (Eq. 14): (1/n^2) sum_{a,b} J_a^T m_a K(x_a, x_b) m_b^T J_b with
    J = d/dtheta grad_x log p (the V-statistic, so that it is positive semi-definite);
    DSM / SM / NNSM (Eq. 15): (1/n) sum_a (m_a^T J_a)^T (m_a^T J_a) (m = I for SM). The sample
    stands in for P_theta (at the minimiser they agree). Cost O(n^2 d p) resp. O(n d p^2).
    """
    X, theta, diff = _validate(model, theta, X, discrepancy, kernel, diffusion)
    block_size = _check_block_size(block_size)
    return _finite_result(discrepancy, theta, "information tensor", lambda: _information(
        model, X, theta, discrepancy, kernel, diff, block_size))


def _information(model, X, theta, discrepancy, kernel, diff, block_size=None):
    xp, dev = aa.namespace(X=X)
    n, d = int(X.shape[0]), int(X.shape[1])
    if discrepancy == "nnsm" and diff is None:
        diff = _nn_diffusion()
    J = _models.score_dtheta(model, X, theta)
    if diff is None:
        H = J
    else:
        kind, m = diff.value(X, theta)
        H = _mT(xp, kind, m, J)  # (n, d, p)
    p = int(H.shape[2])
    if discrepancy not in _KERNEL_BASED:
        g = xp.sum(xp.matmul(xp.permute_dims(H, (0, 2, 1)), H), axis=0) / n
        return aa.to_host(g)
    plan = _plan(kernel, X, xp, dev)
    if plan.C is not None:
        H = xp.matmul(aa.from_host(plan.C.T, xp=xp, device=dev)[None, ...], H)
    U = plan.wh.points(X)
    b = _block_rows(n, block_size, xp)
    g = xp.zeros((p, p), dtype=xp.float64, device=dev)
    for a0 in range(0, n, b):
        a1 = min(n, a0 + b)
        q = _pair_sqdist(xp, U[a0:a1, ...], U)
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

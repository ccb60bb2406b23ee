"""Per-point quantities of the Stein losses: checked scores, v(x) = m^T grad log p + div m and
its theta-Jacobian, and the batched matrix algebra (m^T A, diagonals, traces) they share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from . import derivatives as _deriv

__all__ = ["checked_scores", "mT", "PointTerms", "point_terms", "batch_diagonal", "batch_trace"]


def checked_scores(model, X, theta):
    """``model.score(X, theta)``, checked for shape and finiteness (ValueError naming theta)."""
    xp, _ = aa.namespace(X=X)
    S = _deriv.model_call(model, "score", X, theta)
    if tuple(S.shape) != tuple(X.shape):
        raise ValueError(f"model.score must return shape {tuple(X.shape)}, got {tuple(S.shape)}")
    bad = int(xp.sum(xp.astype(val.nonfinite_rows(xp, S), xp.int64)))
    if bad:
        raise ValueError(
            f"model.score returned NaN or inf at {bad} of {X.shape[0]} points for theta = {theta}"
        )
    return S


def mT(xp, kind, m, A):
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
class PointTerms:
    """v = m^T s + div m at each point, m, and their theta-Jacobians when asked for."""

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


def point_terms(model, X, theta, diff, need_grad) -> PointTerms:
    """The :class:`PointTerms` of the sample (O(n d) per point, O(n d p) with the gradient)."""
    xp, _ = aa.namespace(X=X)
    S = checked_scores(model, X, theta)
    if diff is None:
        kind, m, div = "identity", None, None
        v = S
    else:
        kind, m = diff.value(X, theta)
        div = diff.divergence(X, theta, kind)
        if tuple(div.shape) != tuple(X.shape):
            raise ValueError(f"diffusion divergence must have shape {tuple(X.shape)}")
        v = mT(xp, kind, m, S) + div
    pts = PointTerms(kind, m, v)
    if need_grad:
        J = _deriv.score_dtheta(model, X, theta)
        p = theta.size
        if tuple(J.shape) != (X.shape[0], X.shape[1], p):
            raise ValueError(
                f"model.score_dtheta must return shape {(X.shape[0], X.shape[1], p)}, "
                f"got {tuple(J.shape)}"
            )
        dv = mT(xp, kind, m, J)
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



def batch_diagonal(xp, A):
    """The diagonals (n, d) of a stack of (d, d) matrices."""
    d = A.shape[-1]
    eye = xp.eye(d, dtype=xp.float64, device=aa.device_of(A))
    return xp.sum(A * eye[None, ...], axis=2)


def batch_trace(xp, A):
    """The traces (n,) of a stack of (d, d) matrices."""
    return xp.sum(batch_diagonal(xp, A), axis=1)


"""The score matching family: SM, DSM and NNSM losses and their information tensor.

SM (Barp et al., 2019, Eq. 8): mean(Laplacian log p + ||grad log p||^2 / 2). DSM (Eq. 11,
App. B.6.2): mean(||m^T grad log p||^2 + 2 <div(m m^T), grad log p> + 2 Tr[m m^T Hess log p]),
so DSM with m = I is 2 SM. NNSM is DSM with m(x) = diag(x_i) (Sec. 2.2; the non-negative score
matching choice h_i(x_i) = x_i^2, as in Sec. 4.2). Cost O(n d^2); their theta-gradients are
central differences of the loss.
"""

from __future__ import annotations

from .. import _array_api as aa
from . import derivatives as _deriv
from .pointwise import batch_diagonal, batch_trace, checked_scores, mT

__all__ = ["dsm_value", "dsm_terms", "information"]


def dsm_value(model, X, theta, diff) -> float:
    """The DSM loss (Eq. 11) with diffusion ``diff`` (None: m = I, twice the SM loss)."""
    xp, _ = aa.namespace(X=X)
    return float(xp.mean(dsm_terms(model, X, theta, diff)))


def dsm_terms(model, X, theta, diff):
    """The per-point DSM terms F_theta(x_i) (Eq. 11, Thm. 6), (n,) in X's namespace; their mean
    is :func:`dsm_value`."""
    xp, _ = aa.namespace(X=X)
    S = checked_scores(model, X, theta)
    H = _deriv.score_dx(model, X, theta)
    n, d = X.shape
    if tuple(H.shape) != (n, d, d):
        raise ValueError(f"model.score_dx must return shape {(n, d, d)}, got {tuple(H.shape)}")
    if diff is None:
        val = xp.sum(S * S, axis=1) + 2.0 * batch_trace(xp, H)
    else:
        kind, m = diff.value(X, theta)
        dmm = diff.div_mmT(X, theta, kind)
        if kind == "scalar":
            ms2 = m * m * xp.sum(S * S, axis=1)
            tr = m * m * batch_trace(xp, H)
        elif kind == "diag":
            ms2 = xp.sum((m * S) ** 2, axis=1)
            tr = xp.sum(m * m * batch_diagonal(xp, H), axis=1)
        else:
            mts = mT(xp, kind, m, S)
            ms2 = xp.sum(mts * mts, axis=1)
            A = m @ xp.permute_dims(m, (0, 2, 1))
            tr = xp.sum(xp.reshape(A * H, (n, -1)), axis=1)
        val = ms2 + 2.0 * (xp.sum(dmm * S, axis=1) + tr)
    return val


def information(H):
    """The score matching information tensor (Eq. 15), (1/n) sum_a H_a^T H_a with
    H = m^T d/dtheta grad_x log p of shape (n, d, p); host (p, p), PSD. Cost O(n d p^2)."""
    xp, _ = aa.namespace(H=H)
    g = xp.sum(xp.matmul(xp.permute_dims(H, (0, 2, 1)), H), axis=0) / int(H.shape[0])
    return aa.to_host(g)

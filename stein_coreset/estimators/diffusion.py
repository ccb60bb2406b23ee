"""Diffusion matrices m(x, theta) (Barp et al., 2019, Sec. 2) and their x-divergences.

NNSM's m(x) = diag(x) (Sec. 2.2) is :func:`nn_diffusion`; derivatives not given by the user are
central differences of the O(n) per-point map.
"""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from . import derivatives as _deriv

__all__ = ["Diffusion", "nn_diffusion", "as_diffusion"]


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
        h = _deriv.FD_X * (1.0 + xp.abs(x[:, j]))
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

    See Also
    --------
    loss : ``discrepancy="dksd"`` or ``"dsm"`` with ``diffusion=``.
    fit : the same argument.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> X = model.sample(300, [0.5, 2.0], np.random.default_rng(0))     # theta = (mu, sigma)
    >>> diff = est.Diffusion(lambda x, theta: 1.0 + x[:, 0] ** 2)       # scalar m(x) = 1 + x^2
    >>> round(est.loss(model, [0.5, 2.0], X, discrepancy="dksd", diffusion=diff), 4)
    -0.1311
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


def nn_diffusion() -> Diffusion:
    """m(x) = diag(x) (NNSM, Sec. 2.2 with h_i(x_i) = x_i^2): div m = 1, div(m m^T) = 2 x."""
    return Diffusion(
        lambda x, theta: x,
        divergence=lambda x, theta: aa.namespace(x=x)[0].ones_like(x),
        div_mmT=lambda x, theta: 2.0 * x,
        theta_dependent=False,
    )


def as_diffusion(diffusion):
    """None, a :class:`Diffusion`, or a callable m(x, theta) wrapped in one; TypeError else."""
    if diffusion is None or isinstance(diffusion, Diffusion):
        return diffusion
    if callable(diffusion):
        return Diffusion(diffusion)
    raise TypeError(
        f"diffusion must be None, a callable m(x, theta) or a Diffusion, got "
        f"{type(diffusion).__name__}"
    )


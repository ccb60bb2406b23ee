"""Exponential families p_theta(x) ∝ exp(<theta, T(x)> + b(x)) (Barp et al., 2019, Sec. 2.4,
App. D.3), and the intractable model of Sec. 4.4 with its exact sampler.

The score is affine in theta, so with a theta-free diffusion and kernel every loss is a convex
quadratic in theta and ``fit(..., optimizer="closed_form")`` solves it exactly.
"""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from .. import _validation as _val
from .derivatives import fd_jacobian_x

__all__ = ["ExponentialFamily", "intractable_model", "sample_intractable"]


def _xp(x):
    return aa.namespace(x=x)


class ExponentialFamily:
    """Exponential family p_theta(x) ∝ exp(<theta, T(x)> + b(x)) (Sec. 2.4, App. D.3).

    The score is grad b + sum_j theta_j grad T_j, affine in theta, so with a diffusion and a
    kernel that do not depend on theta every DKSD / KSD / DSM / SM loss is a convex quadratic in
    theta and ``fit(..., optimizer="closed_form")`` solves it exactly.

    Parameters
    ----------
    T : callable x -> (n, p), optional
        Sufficient statistics (only needed when ``grad_T`` is not given; then differentiated by
        central differences).
    b : callable x -> (n,), optional
        Log base measure (only needed when ``grad_b`` is not given). Default 0.
    grad_T : callable x -> (n, p, d), optional
        Jacobian of T.
    grad_b : callable x -> (n, d), optional
    hess_T : callable x -> (n, p, d, d), optional
        Hessians of the T_j (for SM / DSM); central differences of ``grad_T`` otherwise.
    hess_b : callable x -> (n, d, d), optional
    n_params : int, optional
        p; read off one evaluation when not given.
    param_names : sequence of str, optional
        A name per parameter (``theta[j]`` otherwise), for messages and the summary table.
    bounds : sequence of (lower, upper), optional
        Open interval per parameter (``None`` ends unbounded): the natural parameter space,
        e.g. ``(None, 0)`` for the coefficient of T(x) = x^2.
    support : (lower, upper) or a sequence of d such pairs, optional
        The open set the data live in; a sample outside is refused (see
        ``stein_coreset.estimators.domains``).

    See Also
    --------
    fit : ``optimizer="closed_form"`` solves the quadratic loss exactly.
    intractable_model : an exponential family with no normalising constant in closed form.

    Examples
    --------
    N(theta, I): T(x) = x, b(x) = -||x||^2 / 2.

    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.ExponentialFamily(grad_T=lambda x: x[:, None, :], grad_b=lambda x: -x)
    >>> X = np.random.default_rng(0).normal(0.5, 1.0, (300, 1))
    >>> f = est.fit(model, X, discrepancy="ksd", optimizer="closed_form")
    >>> np.round(f.theta, 4), bool(f.converged)
    (array([0.5296]), True)
    """

    def __init__(
        self,
        T=None,
        b=None,
        *,
        grad_T=None,
        grad_b=None,
        hess_T=None,
        hess_b=None,
        n_params: int | None = None,
        param_names=None,
        bounds=None,
        support=None,
    ):
        if T is None and grad_T is None:
            raise ValueError("ExponentialFamily needs the sufficient statistics T or grad_T")
        for name, f in [("T", T), ("b", b), ("grad_T", grad_T), ("grad_b", grad_b),
                        ("hess_T", hess_T), ("hess_b", hess_b)]:
            if f is not None and not callable(f):
                raise TypeError(f"{name} must be callable, got {type(f).__name__}")
        self.T, self.b = T, b
        self._grad_T, self._grad_b = grad_T, grad_b
        self._hess_T, self._hess_b = hess_T, hess_b
        self._p = None if n_params is None else _val.check_int(n_params, "n_params", lo=1)
        self.linear_in_theta = True
        if param_names is not None:
            self.param_names = tuple(str(s) for s in param_names)
            if self._p is None:
                self._p = len(self.param_names)
        if bounds is not None:
            self.bounds = [tuple(b) for b in bounds]
        self.support = support

    @property
    def n_params(self):
        return self._p

    def grad_T(self, x):
        """(n, p, d)."""
        if self._grad_T is not None:
            G = self._grad_T(x)
        else:
            G = fd_jacobian_x(self.T, x)
        if G.ndim != 3 or G.shape[0] != x.shape[0] or G.shape[2] != x.shape[1]:
            raise ValueError(
                f"grad_T must return shape (n, p, d) = ({x.shape[0]}, p, {x.shape[1]}), "
                f"got {tuple(G.shape)}"
            )
        if self._p is None:
            self._p = int(G.shape[1])
        return G

    def grad_b(self, x):
        xp, dev = _xp(x)
        if self._grad_b is not None:
            return self._grad_b(x)
        if self.b is None:
            return xp.zeros(x.shape, dtype=xp.float64, device=dev)
        return fd_jacobian_x(lambda z: self.b(z)[:, None], x)[:, 0, :]

    def score(self, x, theta):
        xp, dev = _xp(x)
        G = self.grad_T(x)
        th = xp.asarray(np.asarray(theta, dtype=np.float64), device=dev)
        return self.grad_b(x) + xp.sum(G * th[None, :, None], axis=1)

    def score_dtheta(self, x, theta):
        xp, _ = _xp(x)
        return xp.permute_dims(self.grad_T(x), (0, 2, 1))

    def score_dx(self, x, theta):
        xp, dev = _xp(x)
        n, d = x.shape
        if self._hess_T is not None:
            HT = self._hess_T(x)
        else:
            HT = fd_jacobian_x(lambda z: xp.reshape(self.grad_T(z), (n, -1)), x)
            HT = xp.reshape(HT, (n, -1, d, d))
        if self._hess_b is not None:
            Hb = self._hess_b(x)
        else:
            Hb = fd_jacobian_x(self.grad_b, x)
        th = xp.asarray(np.asarray(theta, dtype=np.float64), device=dev)
        return Hb + xp.sum(HT * th[None, :, None, None], axis=1)

    def default_theta0(self, X):
        """Zeros, moved inside any declared bounds (lower + 1, upper - 1, or the midpoint)."""
        t = np.zeros(self._p if self._p is not None else self.grad_T(X[:1, ...]).shape[1])
        for j, (lo, hi) in enumerate(getattr(self, "bounds", None) or []):
            if lo is not None and hi is not None:
                t[j] = 0.5 * (lo + hi)
            elif lo is not None and not t[j] > lo:
                t[j] = lo + 1.0
            elif hi is not None and not t[j] < hi:
                t[j] = hi - 1.0
        return t

    def __repr__(self):
        return f"ExponentialFamily(n_params={self._p})"


def _intractable_parts(xp, x):
    d = x.shape[1]
    dev = aa.device_of(x)
    idx = xp.arange(d, device=dev)
    s = xp.sum(x[:, 2:], axis=1)  # sum_{i >= 3} x_i (1-indexed)
    x1 = x[:, 0]
    # grad of b(x) = -0.5 ||x||^2 + 0.2 x_1 sum_{i>=3} x_i + 0.6 tanh(x_1)
    g = -x + 0.2 * xp.where(idx[None, :] >= 2, x1[:, None], 0.0)
    g = g + xp.where(idx[None, :] == 0, (0.2 * s + 0.6 * (1.0 - xp.tanh(x1) ** 2))[:, None], 0.0)
    return idx, g


def intractable_model(d: int = 6, coord: int = 4) -> ExponentialFamily:
    """The unnormalised model of Sec. 4.4 (from Liu et al., 2019): p ∝ exp(eta(theta)^T psi(x)).

    psi(x) = (sum_i x_i^2, sum_{i>=3} x_1 x_i, tanh(x_1), ..., tanh(x_d)) and
    eta(theta) = (-0.5, 0.2, 0.6, 0, 0, 0, theta, 0) for d = 6: theta multiplies tanh(x_5)
    (``coord`` = 4, 0-indexed); the true value in the paper is theta* = -1. As an exponential
    family in theta: T(x) = tanh(x_coord), b(x) = -0.5 ||x||^2 + 0.2 x_1 sum_{i>=3} x_i
    + 0.6 tanh(x_1). Analytic gradients and Hessians.

    See Also
    --------
    sample_intractable : exact draws from it.
    ExponentialFamily : the model class it returns.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> X = est.sample_intractable(300, seed=0)                  # theta* = -1
    >>> f = est.fit(est.intractable_model(), X, discrepancy="ksd", optimizer="closed_form")
    >>> np.round(f.theta, 4), bool(f.converged)
    (array([-1.0597]), True)
    """
    d, coord = int(d), int(coord)
    if d < 3 or not (0 < coord < d):
        raise ValueError(f"need d >= 3 and 0 < coord < d, got d={d}, coord={coord}")

    def grad_T(x):
        xp, dev = _xp(x)
        idx = xp.arange(d, device=dev)
        t = 1.0 - xp.tanh(x[:, coord]) ** 2
        return xp.where(idx[None, :] == coord, t[:, None], 0.0)[:, None, :]

    def hess_T(x):
        xp, dev = _xp(x)
        idx = xp.arange(d, device=dev)
        th = xp.tanh(x[:, coord])
        h = -2.0 * th * (1.0 - th * th)
        mask = (idx[:, None] == coord) & (idx[None, :] == coord)
        return xp.where(mask[None, :, :], h[:, None, None], 0.0)[:, None, :, :]

    def grad_b(x):
        return _intractable_parts(_xp(x)[0], x)[1]

    def hess_b(x):
        xp, dev = _xp(x)
        n = x.shape[0]
        H = np.eye(d) * -1.0
        H[0, 2:] = H[2:, 0] = 0.2
        Hx = xp.asarray(H, device=dev)
        idx = xp.arange(d, device=dev)
        t = xp.tanh(x[:, 0])
        h11 = 0.6 * (-2.0 * t * (1.0 - t * t))
        mask = (idx[:, None] == 0) & (idx[None, :] == 0)
        corr = xp.where(mask[None, ...], h11[:, None, None], 0.0)
        return xp.broadcast_to(Hx[None, ...], (n, d, d)) + corr

    def T(x):
        return _xp(x)[0].tanh(x[:, coord : coord + 1])

    model = ExponentialFamily(
        T, grad_T=grad_T, grad_b=grad_b, hess_T=hess_T, hess_b=hess_b, n_params=1
    )
    model.d, model.coord = d, coord
    return model


def sample_intractable(n: int, theta: float = -1.0, d: int = 6, coord: int = 4, seed=None):
    """Exact draws from :func:`intractable_model` by rejection from N(0, Q^{-1}).

    The Gaussian part has precision Q = I - 0.2 (e_1 s^T + s e_1^T), s = sum_{i>=3} e_i (positive
    definite); the rest, 0.6 tanh(x_1) + theta tanh(x_coord), is bounded by ``0.6 + |theta|``, which
    gives the acceptance probability ``exp(0.6 tanh(x_1) + theta tanh(x_coord) - 0.6 - |theta|)``.

    See Also
    --------
    intractable_model : the model.

    Examples
    --------
    >>> from stein_coreset import estimators as est
    >>> est.sample_intractable(300, seed=0).shape
    (300, 6)
    """
    rng = np.random.default_rng(seed)
    Q = np.eye(d)
    Q[0, 2:] = Q[2:, 0] = -0.2
    L = np.linalg.cholesky(np.linalg.inv(Q))
    out, have = [], 0
    bound = 0.6 + abs(theta)
    while have < n:
        z = rng.standard_normal((4 * n, d)) @ L.T
        logacc = 0.6 * np.tanh(z[:, 0]) + theta * np.tanh(z[:, coord]) - bound
        keep = z[np.log(rng.random(z.shape[0])) < logacc]
        out.append(keep)
        have += keep.shape[0]
    return np.concatenate(out, axis=0)[:n]

"""Parametric models with unnormalised densities for minimum Stein discrepancy estimation.

A model is any object with ``score(x, theta)`` = grad_x log p_theta(x), shape (n, d). It may also
give ``score_dtheta(x, theta)`` (d/dtheta grad_x log p, shape (n, d, p)) and
``score_dx(x, theta)`` (the Hessian of log p in x, shape (n, d, d)); :func:`score_dtheta` and
:func:`score_dx` below fall back to central finite differences of ``score`` when they are
missing (2 p, resp. 2 d, score evaluations on all points: O(n) work, never O(n^2)).

The built-in models (Barp et al., 2019, Sec. 4) keep some parameters fixed when they are given a
value and estimate the others: ``StudentT(nu=5, scale=1.0)`` has theta = (location,). The free
parameters are ordered as in each class's ``param_names``. Scores are written against the array
API (``xp`` of the points), except :class:`SymmetricBessel`, whose Bessel functions come from
``scipy.special`` on the host (one explicit transfer each way per call).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _array_api as aa
from .. import _validation as _val

__all__ = [
    "Gaussian",
    "StudentT",
    "GeneralizedGamma",
    "SymmetricBessel",
    "ExponentialFamily",
    "intractable_model",
    "sample_intractable",
    "score_dtheta",
    "score_dx",
    "n_params",
    "check_theta",
]

_FD_THETA = 1e-5  # relative central-difference step in theta
FD_X = 6e-6  # relative central-difference step in x (about eps^(1/3))


def _xp(x):
    return aa.namespace(x=x)


def _theta_steps(theta):
    return _FD_THETA * np.maximum(1.0, np.abs(theta))


def score_dtheta(model, x, theta):
    """d/dtheta of the score, (n, d, p): ``model.score_dtheta`` or central differences of score."""
    f = getattr(model, "score_dtheta", None)
    if f is not None:
        return f(x, theta)
    xp, _ = _xp(x)
    theta = np.asarray(theta, dtype=np.float64)
    h = _theta_steps(theta)
    cols = []
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h[j]
        cols.append((model.score(x, theta + e) - model.score(x, theta - e)) / (2.0 * float(h[j])))
    return xp.stack(cols, axis=2)


def score_dx(model, x, theta):
    """Hessian of log p in x, (n, d, d): ``model.score_dx`` or central differences of score."""
    f = getattr(model, "score_dx", None)
    if f is not None:
        return f(x, theta)
    return _fd_jacobian_x(lambda z: model.score(z, theta), x)


def _fd_jacobian_x(f, x):
    """Central-difference Jacobian of a per-point map f: (n, d) -> (n, k); returns (n, k, d)."""
    xp, dev = _xp(x)
    n, d = x.shape
    cols = []
    for j in range(d):
        h = FD_X * (1.0 + xp.abs(x[:, j]))
        e = xp.zeros((1, d), dtype=xp.float64, device=dev)
        e = xp.where(xp.arange(d, device=dev)[None, :] == j, 1.0, e)
        step = h[:, None] * e
        fp, fm = f(x + step), f(x - step)
        shape = (n,) + (1,) * (fp.ndim - 1)
        cols.append((fp - fm) / (2.0 * xp.reshape(h, shape)))
    return xp.stack(cols, axis=-1)


def n_params(model, theta=None) -> int:
    p = getattr(model, "n_params", None)
    if p is not None:
        return int(p)
    if theta is None:
        raise ValueError("the model does not say how many parameters it has; give theta0")
    return int(np.asarray(theta).size)


def _check_d(d) -> int:
    """The dimension of a model: an integer >= 1 (``d=1.5`` used to become 1 silently)."""
    return _val.check_int(d, "d", lo=1)


def check_theta(model, theta, name: str = "theta") -> np.ndarray:
    """Validate a parameter vector: host float64 (p,), finite, inside the model's domain."""
    import array_api_compat

    if array_api_compat.is_array_api_obj(theta) and not isinstance(theta, np.ndarray):
        t = aa.to_host(theta)
    else:
        try:
            t = np.asarray(theta, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a vector of real numbers, got {theta!r}") from None
    t = np.atleast_1d(t).astype(np.float64)
    if t.ndim != 1:
        raise ValueError(f"{name} must be a 1-D parameter vector, got shape {t.shape}")
    p = getattr(model, "n_params", None)
    if p is not None and t.size != p:
        names = getattr(model, "param_names", None)
        hint = f" ({', '.join(names)})" if names else ""
        raise ValueError(f"{name} must have {p} entries{hint}, got {t.size}")
    if not np.all(np.isfinite(t)):
        raise ValueError(f"{name} has NaN or inf entries: {t}")
    dom = getattr(model, "check_domain", None)
    if dom is not None:
        dom(t, name)
    return t


class _Parametric:
    """A model with a full parameter vector, some entries fixed, the rest estimated.

    Subclasses define ``_layout`` (list of (name, size, lower bound, fixed value or None)) and
    ``_score(xp, x, full)``, ``_score_dtheta(xp, x, full)`` ((n, d, P) over the full vector),
    ``_score_dx(xp, x, full)``.
    """

    d: int

    def _setup(self, layout):
        self._layout = layout
        full, free, lower, names = [], [], [], []
        for name, size, lo, val in layout:
            if val is None:
                vals = [np.nan] * size
            else:
                arr = np.asarray(val, dtype=np.float64)
                if arr.size not in (1, size):
                    raise ValueError(
                        f"{name} has {arr.size} entries, but the model has {size} "
                        f"({type(self).__name__} of d = {getattr(self, 'd', size)}); pass "
                        f"d={arr.size} for {arr.size}-dimensional data"
                    )
                vals = list(np.broadcast_to(arr.reshape(-1) if arr.size == size else arr,
                                            (size,)))
                if lo is not None and any(not (v > lo) for v in vals):
                    raise ValueError(f"{name} must be > {lo}, got {val}")
                if not all(math.isfinite(v) for v in vals):
                    raise ValueError(f"{name} must be finite, got {val}")
            for i, v in enumerate(vals):
                idx = len(full)
                full.append(v)
                if val is None:
                    free.append(idx)
                    lower.append(lo)
                    names.append(name if size == 1 else f"{name}[{i}]")
        self._full_template = np.asarray(full, dtype=np.float64)
        self._free = np.asarray(free, dtype=np.int64)
        self._lower = lower
        self.param_names = tuple(names)
        if not free:
            raise ValueError("every parameter is fixed; leave at least one as None to estimate")

    @property
    def n_params(self) -> int:
        return int(self._free.size)

    @property
    def bounds(self):
        """L-BFGS-B bounds of the free parameters (open lower bounds are nudged inside)."""
        return [(None if lo is None else lo + 1e-10, None) for lo in self._lower]

    def check_domain(self, theta, name="theta"):
        for j, lo in enumerate(self._lower):
            if lo is not None and not theta[j] > lo:
                raise ValueError(
                    f"{name}[{j}] ({self.param_names[j]}) must be > {lo}, got {theta[j]:.6g}"
                )

    def in_domain(self, theta) -> bool:
        return all(lo is None or theta[j] > lo for j, lo in enumerate(self._lower))

    def full(self, theta) -> np.ndarray:
        f = self._full_template.copy()
        f[self._free] = np.asarray(theta, dtype=np.float64)
        return f

    def _check_x(self, x):
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (n, {self.d}) for this model, got {x.shape}")

    def score(self, x, theta):
        xp, _ = _xp(x)
        self._check_x(x)
        return self._score(xp, x, self.full(theta))

    def score_dtheta(self, x, theta):
        xp, _ = _xp(x)
        self._check_x(x)
        J = self._score_dtheta(xp, x, self.full(theta))
        return xp.stack([J[:, :, int(j)] for j in self._free], axis=2)

    def score_dx(self, x, theta):
        xp, _ = _xp(x)
        self._check_x(x)
        return self._score_dx(xp, x, self.full(theta))

    def _loc_scale(self, full):
        return full[: self.d], float(full[self.d])

    def default_theta0(self, X) -> np.ndarray:
        """Robust start: coordinatewise median for locations, scaled MAD for scales."""
        Xh = aa.to_host(X)
        med = np.median(Xh, axis=0)
        mad = float(np.median(np.abs(Xh - med))) / 0.6745 or 1.0
        full = self._full_template.copy()
        k = 0
        for name, size, _lo, val in self._layout:
            if val is None:
                if name == "loc":
                    full[k : k + size] = med
                elif name == "scale":
                    full[k : k + size] = self._scale_from_mad(mad)
                else:
                    full[k : k + size] = self._default(name)
            k += size
        return full[self._free]

    def _scale_from_mad(self, mad):
        return mad

    def _default(self, name):  # pragma: no cover - overridden where a model has other params
        return 1.0

    def __repr__(self):
        parts = []
        k = 0
        for name, size, _lo, val in self._layout:
            parts.append(f"{name}={'free' if val is None else val}")
            k += size
        return f"{type(self).__name__}({', '.join(parts)})"


def _eye(xp, d, dev):
    return xp.eye(d, dtype=xp.float64, device=dev)


class Gaussian(_Parametric):
    """Isotropic Gaussian p(x) ∝ exp(-||x - mu||^2 / (2 sigma^2)); theta = (mu (d), sigma > 0).

    See Also
    --------
    fit : estimates theta from a sample.
    StudentT : a heavy-tailed location-scale model.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> np.round(model.score(np.array([[1.0], [2.0]]), np.array([0.0, 1.0])).ravel(), 4)
    array([-1., -2.])
    >>> model.sample(300, [0.5, 2.0], np.random.default_rng(0)).shape
    (300, 1)
    """

    def __init__(self, d: int = 1, loc=None, scale=None):
        self.d = _check_d(d)
        self._setup([("loc", self.d, None, loc), ("scale", 1, 0.0, scale)])

    def _score(self, xp, x, full):
        mu, s = self._loc_scale(full)
        # (delta / s) / s, not delta / s**2: a Python float's ** raises OverflowError past
        # 1e154, and the scaled form keeps delta / s^2 exact where it is representable
        return -((x - xp.asarray(mu, device=aa.device_of(x))[None, :]) / s) / s

    def _score_dtheta(self, xp, x, full):
        mu, s = self._loc_scale(full)
        dev = aa.device_of(x)
        delta = x - xp.asarray(mu, device=dev)[None, :]
        n = x.shape[0]
        dmu = xp.broadcast_to(_eye(xp, self.d, dev)[None, :, :] / (s * s), (n, self.d, self.d))
        ds = 2.0 * ((delta / s) / s) / s  # 2 delta / s^3 without forming s^3 (~1e447 at X ~ 1e149)
        return xp.concat([dmu, ds[:, :, None]], axis=2)

    def _score_dx(self, xp, x, full):
        _, s = self._loc_scale(full)
        n = x.shape[0]
        eye = _eye(xp, self.d, aa.device_of(x))[None, ...]
        return xp.broadcast_to(-eye / (s * s), (n, self.d, self.d))

    def sample(self, n, theta, rng):
        mu, s = self._loc_scale(self.full(theta))
        return mu + s * rng.standard_normal((n, self.d))


class StudentT(_Parametric):
    """Non-standardised Student-t, p(x) ∝ (1 + ||x - mu||^2 / (nu sigma^2))^(-(nu + d) / 2).

    theta = (mu (d), sigma > 0); ``nu`` > 0 is fixed (Sec. 4.2 uses nu = 5, d = 1).

    See Also
    --------
    Gaussian : the light-tailed limit nu -> inf.
    fit : estimates theta from a sample.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.StudentT(nu=5.0)
    >>> np.round(model.score(np.array([[1.0], [2.0]]), np.array([0.0, 1.0])).ravel(), 4)
    array([-1.    , -1.3333])
    """

    def __init__(self, nu: float = 5.0, d: int = 1, loc=None, scale=None):
        nu = float(nu)
        if not (nu > 0 and math.isfinite(nu)):
            raise ValueError(f"nu must be positive and finite, got {nu}")
        self.nu = nu
        self.d = _check_d(d)
        self._setup([("loc", self.d, None, loc), ("scale", 1, 0.0, scale)])

    def _parts(self, xp, x, full):
        mu, s = self._loc_scale(full)
        delta = x - xp.asarray(mu, device=aa.device_of(x))[None, :]
        a = self.nu * s * s
        w = 1.0 + xp.sum(delta * delta, axis=1) / a
        c = (self.nu + self.d) / a
        return delta, w, c, a, s

    def _score(self, xp, x, full):
        delta, w, c, _, _ = self._parts(xp, x, full)
        return -c * delta / w[:, None]

    def _score_dtheta(self, xp, x, full):
        delta, w, c, a, s = self._parts(xp, x, full)
        dev = aa.device_of(x)
        w2 = (w * w)[:, None, None]
        outer = delta[:, :, None] * delta[:, None, :]
        dmu = c * _eye(xp, self.d, dev)[None, ...] / w[:, None, None] - 2.0 * c * outer / (a * w2)
        ds = 2.0 * c * delta / (s * (w * w)[:, None])
        return xp.concat([dmu, ds[:, :, None]], axis=2)

    def _score_dx(self, xp, x, full):
        delta, w, c, a, _ = self._parts(xp, x, full)
        outer = delta[:, :, None] * delta[:, None, :]
        eye = _eye(xp, self.d, aa.device_of(x))[None, ...]
        return -c * eye / w[:, None, None] + 2.0 * c * outer / (a * (w * w)[:, None, None])

    def sample(self, n, theta, rng):
        mu, s = self._loc_scale(self.full(theta))
        z = rng.standard_normal((n, self.d))
        chi = rng.chisquare(self.nu, size=(n, 1))
        return mu + s * z / np.sqrt(chi / self.nu)


class GeneralizedGamma(_Parametric):
    """Generalised gamma location model ``p(x) ∝ exp(-|x - theta_1|^theta_2)``, d = 1 (Sec. 4.3).

    theta = (location theta_1, power theta_2 > 1). The paper writes (x - theta_1)^theta_2; we use
    the absolute value so that the density is defined on all of R for non-integer powers
    (theta_2 = 2 is the Gaussian N(theta_1, 1/2)). The score is C^1 only for theta_2 >= 2.

    See Also
    --------
    fit : estimates theta; DSM / SM need no normalising constant.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.GeneralizedGamma()
    >>> np.round(model.score(np.array([[1.0], [2.0]]), np.array([0.0, 2.0])).ravel(), 4)
    array([-2., -4.])
    """

    d = 1

    def __init__(self, loc=None, power=None):
        self._setup([("loc", 1, None, loc), ("power", 1, 1.0, power)])

    def _default(self, name):
        return 2.0

    def _parts(self, xp, x, full):
        t1, t2 = float(full[0]), float(full[1])
        delta = x - t1
        r = xp.abs(delta)
        sgn = xp.sign(delta)
        return delta, r, sgn, t2

    def _score(self, xp, x, full):
        _, r, sgn, t2 = self._parts(xp, x, full)
        return -t2 * sgn * r ** (t2 - 1.0)

    def _score_dtheta(self, xp, x, full):
        _, r, sgn, t2 = self._parts(xp, x, full)
        d1 = t2 * (t2 - 1.0) * r ** (t2 - 2.0)
        rpos = r > 0
        logr = xp.log(xp.where(rpos, r, 1.0))
        d2 = xp.where(rpos, -sgn * r ** (t2 - 1.0) * (1.0 + t2 * logr), 0.0)
        return xp.stack([d1, d2], axis=2)

    def _score_dx(self, xp, x, full):
        _, r, _, t2 = self._parts(xp, x, full)
        return (-t2 * (t2 - 1.0) * r ** (t2 - 2.0))[:, :, None]

    def sample(self, n, theta, rng):
        t1, t2 = self.full(theta)
        g = rng.gamma(1.0 / t2, 1.0, size=(n, 1)) ** (1.0 / t2)
        return t1 + np.where(rng.random((n, 1)) < 0.5, -g, g)


class SymmetricBessel(_Parametric):
    """Symmetric Bessel distribution, p(x) ∝ z^(s - d/2) K_(s - d/2)(z), z = ||x - mu|| / sigma.

    theta = (mu (d), sigma > 0); smoothness ``s`` >= d/2 is fixed (Sec. 4.1; s = 1, d = 1 is the
    Laplace distribution). With nu = s - d/2 and R = K_(nu-1)(z) / K_nu(z):
    d/dz log p = -R and d^2/dz^2 log p = 1 - (2 nu - 1) R / z - R^2. The ratio uses
    ``scipy.special.kve`` on the host (one transfer each way per call). The score is 0 at z = 0.

    See Also
    --------
    fit : estimates theta (``nelder_mead`` when loc is free: the score has a kink there).

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.SymmetricBessel(s=1.0)                      # the Laplace distribution
    >>> np.round(model.score(np.array([[1.0], [2.0]]), np.array([0.0, 1.0])).ravel(), 4)
    array([-1., -1.])
    """

    def __init__(self, s: float = 1.0, d: int = 1, loc=None, scale=None):
        self.d = _check_d(d)
        s = float(s)
        if not (s >= self.d / 2.0 and math.isfinite(s)):
            raise ValueError(f"s must be >= d/2 = {self.d / 2}, got {s}")
        self.s = s
        self.nu = s - self.d / 2.0
        self._setup([("loc", self.d, None, loc), ("scale", 1, 0.0, scale)])

    def _radial(self, x, full):
        """Host arrays: delta (n, d), r, z, g' = -R, g'' (n,)."""
        from scipy.special import kve

        mu, s = self._loc_scale(full)
        delta = aa.to_host(x) - mu[None, :]
        r = np.sqrt(np.sum(delta * delta, axis=1))
        z = r / s
        zs = np.where(z > 0, z, 1.0)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            R = kve(self.nu - 1.0, zs) / kve(self.nu, zs)
        g1 = -R
        g2 = 1.0 - (2.0 * self.nu - 1.0) * R / zs - R * R
        return delta, r, zs, g1, g2, s, z > 0

    def _score(self, xp, x, full):
        delta, r, z, g1, _, s, pos = self._radial(x, full)
        out = np.where(pos[:, None], (g1 / (z * s * s))[:, None] * delta, 0.0)
        return aa.from_host(out, like=x)

    def _hess_host(self, x, full):
        delta, r, z, g1, g2, s, pos = self._radial(x, full)
        rs = np.where(pos, r, 1.0)
        e = delta / rs[:, None]
        ee = e[:, :, None] * e[:, None, :]
        eye = np.eye(self.d)[None, ...]
        phi = g1 / z  # g'(z) / z
        H = (g2 / s / s)[:, None, None] * ee + (phi / s / s)[:, None, None] * (eye - ee)
        H = np.where(pos[:, None, None], H, 0.0)
        ds = -((delta / s) / s / s) * (g2 + phi)[:, None]
        ds = np.where(pos[:, None], ds, 0.0)
        return H, ds

    def _score_dtheta(self, xp, x, full):
        H, ds = self._hess_host(x, full)
        return aa.from_host(np.concatenate([-H, ds[:, :, None]], axis=2), like=x)

    def _score_dx(self, xp, x, full):
        return aa.from_host(self._hess_host(x, full)[0], like=x)

    def _scale_from_mad(self, mad):
        return mad / math.sqrt(2.0 * max(self.s, 0.5))

    @property
    def nonsmooth_params(self) -> tuple:
        """The free parameters in which the score is not differentiable at every x.

        For nu = s - d/2 <= 1/2 the score jumps (nu = 1/2, Laplace: -sign(x - mu) / sigma) or
        blows up (nu < 1/2) at x = mu, so as mu crosses a sample point the loss changes by a
        jump that the chain rule through ``score_dtheta`` misses: the location gradient of the
        loss is wrong (zero for the Laplace model, whose loss is piecewise constant in mu).
        Gradient-based fits refuse such parameters; ``optimizer="nelder_mead"`` does not need
        the gradient. The scale stays smooth.
        """
        if self.nu > 0.5:
            return ()
        return tuple(nm for nm in self.param_names if nm.startswith("loc"))

    @property
    def singular_params(self) -> tuple:
        """The free parameters at whose value the score is unbounded.

        For nu = s - d/2 < 1/2 the score grows like z^(2 nu - 1) as x -> loc, so each sample
        point x_i makes the U-statistic KSD / DKSD loss run to -inf as loc approaches x_i from
        one side (and to +inf from the other): the sample loss has no minimiser, and a fit
        returns a local minimum that depends on its start. :func:`fit` probes for this and then
        does not report ``converged``.
        """
        if self.nu >= 0.5:
            return ()
        return tuple(nm for nm in self.param_names if nm.startswith("loc"))

    def sample(self, n, theta, rng):
        """Gaussian scale mixture: x = mu + sqrt(W) Z, W ~ Gamma(s, scale 2 sigma^2)."""
        mu, s = self._loc_scale(self.full(theta))
        w = rng.gamma(self.s, 2.0 * s * s, size=(n, 1))
        return mu + np.sqrt(w) * rng.standard_normal((n, self.d))


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

    @property
    def n_params(self):
        return self._p

    def grad_T(self, x):
        """(n, p, d)."""
        if self._grad_T is not None:
            G = self._grad_T(x)
        else:
            G = _fd_jacobian_x(self.T, x)
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
        return _fd_jacobian_x(lambda z: self.b(z)[:, None], x)[:, 0, :]

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
            HT = _fd_jacobian_x(lambda z: xp.reshape(self.grad_T(z), (n, -1)), x)
            HT = xp.reshape(HT, (n, -1, d, d))
        if self._hess_b is not None:
            Hb = self._hess_b(x)
        else:
            Hb = _fd_jacobian_x(self.grad_b, x)
        th = xp.asarray(np.asarray(theta, dtype=np.float64), device=dev)
        return Hb + xp.sum(HT * th[None, :, None, None], axis=1)

    def default_theta0(self, X):
        return np.zeros(self._p if self._p is not None else self.grad_T(X[:1, ...]).shape[1])

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

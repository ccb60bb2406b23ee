"""The built-in models of Barp et al. (2019, Sec. 4), and the Gamma distribution.

Location-scale families (:class:`Gaussian`, :class:`StudentT`, :class:`SymmetricBessel`), the
generalised gamma location model (:class:`GeneralizedGamma`) and :class:`Gamma` on (0, inf), each
a :class:`~stein_coreset.estimators.parametric.Parametric`: a parameter given a value is fixed,
one left ``None`` is estimated (``StudentT(nu=5, scale=1.0)`` has theta = (location,)), in the
order of ``param_names``. Scores are written against the array API (``xp`` of the points),
except :class:`SymmetricBessel`, whose Bessel functions come from ``scipy.special`` on the host
(one explicit transfer each way per call). Exponential families are in
:mod:`~stein_coreset.estimators.exponential_family`.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _array_api as aa
from .parametric import Parametric, check_d, eye_matrix

__all__ = ["Gaussian", "StudentT", "GeneralizedGamma", "SymmetricBessel", "Gamma"]


class Gaussian(Parametric):
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
        self.d = check_d(d)
        self._setup([("loc", self.d, (None, None), loc), ("scale", 1, (0.0, None), scale)])

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
        eye = eye_matrix(xp, self.d, dev)[None, :, :]
        dmu = xp.broadcast_to(eye / (s * s), (n, self.d, self.d))
        ds = 2.0 * ((delta / s) / s) / s  # 2 delta / s^3 without forming s^3 (~1e447 at X ~ 1e149)
        return xp.concat([dmu, ds[:, :, None]], axis=2)

    def _score_dx(self, xp, x, full):
        _, s = self._loc_scale(full)
        n = x.shape[0]
        eye = eye_matrix(xp, self.d, aa.device_of(x))[None, ...]
        return xp.broadcast_to(-eye / (s * s), (n, self.d, self.d))

    def sample(self, n, theta, rng):
        mu, s = self._loc_scale(self.full(theta))
        return mu + s * rng.standard_normal((n, self.d))


class StudentT(Parametric):
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
        self.d = check_d(d)
        self._setup([("loc", self.d, (None, None), loc), ("scale", 1, (0.0, None), scale)])

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
        eye = eye_matrix(xp, self.d, dev)[None, ...]
        dmu = c * eye / w[:, None, None] - 2.0 * c * outer / (a * w2)
        ds = 2.0 * c * delta / (s * (w * w)[:, None])
        return xp.concat([dmu, ds[:, :, None]], axis=2)

    def _score_dx(self, xp, x, full):
        delta, w, c, a, _ = self._parts(xp, x, full)
        outer = delta[:, :, None] * delta[:, None, :]
        eye = eye_matrix(xp, self.d, aa.device_of(x))[None, ...]
        return -c * eye / w[:, None, None] + 2.0 * c * outer / (a * (w * w)[:, None, None])

    def sample(self, n, theta, rng):
        mu, s = self._loc_scale(self.full(theta))
        z = rng.standard_normal((n, self.d))
        chi = rng.chisquare(self.nu, size=(n, 1))
        return mu + s * z / np.sqrt(chi / self.nu)


class GeneralizedGamma(Parametric):
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
        self._setup([("loc", 1, (None, None), loc), ("power", 1, (1.0, None), power)])

    def _default(self, name, Xh):
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


class SymmetricBessel(Parametric):
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
        self.d = check_d(d)
        s = float(s)
        if not (s >= self.d / 2.0 and math.isfinite(s)):
            raise ValueError(f"s must be >= d/2 = {self.d / 2}, got {s}")
        self.s = s
        self.nu = s - self.d / 2.0
        self._setup([("loc", self.d, (None, None), loc), ("scale", 1, (0.0, None), scale)])

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


class Gamma(Parametric):
    """Gamma distribution p(x) ∝ x^(shape - 1) exp(-rate x) on x > 0; theta = (shape, rate).

    ``support`` is (0, inf): :func:`fit` refuses a sample with a point <= 0 by name. The score
    (shape - 1) / x - rate is unbounded at 0, so Stein's identity, on which every loss rests,
    needs the density to vanish fast enough there: the boundary terms of SM vanish for
    shape > 2, and the per-point contributions to the sandwich standard error of SM have a
    finite variance only for shape > 4 (they grow like x^-2): :func:`fit` warns when their
    tails look too heavy. The default start is the method of moments.

    See Also
    --------
    fit : estimates theta; ``discrepancy="dksd"`` with m(x) = x keeps every term bounded.
    GeneralizedGamma : a location model on all of R.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gamma()
    >>> np.round(model.score(np.array([[1.0], [2.0]]), np.array([3.0, 1.0])).ravel(), 4)
    array([1., 0.])
    >>> model.param_names, model.support
    (('shape', 'rate'), (0.0, None))
    """

    d = 1
    support = (0.0, None)

    def __init__(self, shape=None, rate=None):
        self._setup([("shape", 1, (0.0, None), shape), ("rate", 1, (0.0, None), rate)])

    def _default(self, name, Xh):
        m, v = float(np.mean(Xh)), float(np.var(Xh))
        if not (m > 0 and v > 0):
            return 1.0
        return m * m / v if name == "shape" else m / v

    def _score(self, xp, x, full):
        a, b = float(full[0]), float(full[1])
        return (a - 1.0) / x - b

    def _score_dtheta(self, xp, x, full):
        return xp.stack([1.0 / x, -xp.ones_like(x)], axis=2)

    def _score_dx(self, xp, x, full):
        a = float(full[0])
        return (-(a - 1.0) / x / x)[:, :, None]

    def sample(self, n, theta, rng):
        a, b = self.full(theta)
        return rng.gamma(a, 1.0 / b, size=(n, 1))

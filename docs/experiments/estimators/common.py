"""Shared by the reliability experiments of this folder (issue 55): the models, the fits, and a
loader for an older ``stein_coreset.estimators`` to measure "before".

``--before DIR`` in a script loads the estimators package from DIR instead of the installed
one (the rest of stein_coreset, the engine included, stays the installed one), e.g. the commit
before the verification:

    mkdir -p /tmp/before && git archive 264a2ee stein_coreset/estimators | tar -x -C /tmp/before
    python docs/experiments/estimators/theta0_grid.py --before /tmp/before/stein_coreset/estimators
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np

import stein_coreset as sc


def estimators(before=None):
    """``stein_coreset.estimators``, or the package in directory ``before`` (loaded as
    ``stein_coreset.estimators_before``, its relative imports resolving into stein_coreset)."""
    if before is None:
        from stein_coreset import estimators as est

        return est
    name = "stein_coreset.estimators_before"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, f"{before}/__init__.py", submodule_search_locations=[str(before)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class CorrelatedGaussian:
    """A user model written to the protocol: the centred bivariate Gaussian, theta = (s1, s2,
    rho), Sigma = [[s1^2, rho s1 s2], [rho s1 s2, s2^2]], rho in (-1, 1), analytic
    derivatives."""

    d = 2
    n_params = 3
    param_names = ("s1", "s2", "rho")
    bounds = [(0.0, None), (0.0, None), (-1.0, 1.0)]

    @staticmethod
    def _sigma(theta):
        s1, s2, r = (float(v) for v in theta)
        S = np.array([[s1 * s1, r * s1 * s2], [r * s1 * s2, s2 * s2]])
        dS = [np.array([[2 * s1, r * s2], [r * s2, 0.0]]),
              np.array([[0.0, r * s1], [r * s1, 2 * s2]]),
              np.array([[0.0, s1 * s2], [s1 * s2, 0.0]])]
        return S, dS

    def score(self, x, theta):
        return -x @ np.linalg.inv(self._sigma(theta)[0])

    def score_dtheta(self, x, theta):
        S, dS = self._sigma(theta)
        P = np.linalg.inv(S)
        return np.stack([x @ (P @ D @ P) for D in dS], axis=2)

    def score_dx(self, x, theta):
        P = np.linalg.inv(self._sigma(theta)[0])
        return np.broadcast_to(-P, (x.shape[0], 2, 2))

    def default_theta0(self, X):
        s = X.std(axis=0)
        return np.array([s[0], s[1], np.corrcoef(X.T)[0, 1]])

    def sample(self, n, theta, rng):
        return rng.standard_normal((n, 2)) @ np.linalg.cholesky(self._sigma(theta)[0]).T

    def __repr__(self):
        return "CorrelatedGaussian()"


def robust_m(x, t):
    """DKSD's diffusion for the Gaussian: m(x) = 1 / (1 + x^2) (as docs/estimators.md)."""
    return 1.0 / (1.0 + x[:, 0] ** 2)


def positive_m(x, t):
    """DKSD's diffusion on (0, inf): m(x) = x, which keeps every term bounded at 0."""
    return x[:, 0]


FULL_M = np.array([[1.0, 0.5], [0.5, 1.0]])


def full_m(x, t):
    """A full constant diffusion matrix for the 2-d model."""
    return np.broadcast_to(FULL_M, (x.shape[0], 2, 2))


def fit_kwargs(discrepancy, model_name):
    """The fit of each (model, discrepancy) cell of the tables: SM, KSD with the
    median-heuristic IMQ, DKSD with that kernel and the model's diffusion."""
    if discrepancy != "dksd":
        return {"discrepancy": discrepancy}
    m = {"gaussian": robust_m, "cauchy": robust_m, "gamma": positive_m,
         "correlated": full_m}[model_name]
    return {"discrepancy": "dksd", "diffusion": m}


IMQ2 = sc.IMQ(2.0)


class UserGamma:
    """A Gamma(shape, rate) written as a user would, with its support declared."""

    d = 1
    n_params = 2
    param_names = ("shape", "rate")
    bounds = [(0.0, None), (0.0, None)]
    support = (0.0, None)

    def score(self, x, theta):
        return (theta[0] - 1.0) / x - theta[1]

    def score_dtheta(self, x, theta):
        return np.stack([1.0 / x, -np.ones_like(x)], axis=2)

    def score_dx(self, x, theta):
        return (-(theta[0] - 1.0) / x / x)[:, :, None]

    def default_theta0(self, X):
        m, v = float(np.mean(X)), float(np.var(X))
        return np.array([m * m / v, m / v])

    def __repr__(self):
        return "UserGamma()"


def halved_scale_derivative(est):
    """A Gaussian whose score_dtheta is off by 1/2 in the scale (the issue's wrong derivative:
    standard errors half the true ones)."""

    class Wrong(est.Gaussian):
        def score_dtheta(self, x, theta):
            J = np.array(super().score_dtheta(x, theta))
            J[:, :, 1] *= 0.5
            return J

    return Wrong()

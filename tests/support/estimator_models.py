"""A user model written to the estimators' protocol, shared by the estimator tests: the centred
bivariate Gaussian with unknown scales and correlation, theta = (s1, s2, rho), bounds
(0, inf), (0, inf), (-1, 1), analytic derivatives."""

import numpy as np


class CorrelatedGaussian:
    """p(x) ∝ exp(-x^T Sigma^-1 x / 2), Sigma = [[s1^2, rho s1 s2], [rho s1 s2, s2^2]]."""

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
        P = np.linalg.inv(self._sigma(theta)[0])
        return -x @ P

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
        S = self._sigma(theta)[0]
        return rng.standard_normal((n, 2)) @ np.linalg.cholesky(S).T

    def __repr__(self):
        return "CorrelatedGaussian()"

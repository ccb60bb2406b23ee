"""Targets with exact scores: the Goodwin oscillator posterior, a 2-D Gaussian mixture, a
correlated Gaussian and a Bayesian logistic regression (host-side NumPy; the ODE solver is
SciPy's)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["Goodwin", "GaussianMixture", "Gaussian", "LogisticRegression", "GOODWIN_THETA"]


# --------------------------------------------------------------------------------------------
# Goodwin oscillator posterior
# --------------------------------------------------------------------------------------------

#: Data-generating parameters (a1, a2, k, alpha) of the Goodwin demo.
GOODWIN_THETA = (1.0, 3.0, 2.0, 0.5)


class Goodwin:
    r"""Posterior over q = log(a1, a2, k, alpha) of the two-variable Goodwin oscillator.

    Model (Goodwin 1965; the d = 4 test bed of Riabiz et al. 2022, Sec. 4.1)::

        dx1/dt = a1 / (1 + a2 x2^rho) - alpha x1,     dx2/dt = k x1 - alpha x2,     x(0) = 0,

    with rho = 10, observed at t = 41, ..., 80 with N(0, sigma^2) noise, sigma = 0.1, on both
    coordinates. Data are generated once, from ``theta`` (default ``GOODWIN_THETA``) with the
    given seed. Prior: a1, a2, k, alpha i.i.d. Gamma(2, 1); the density is over q = log(theta),
    Jacobian included, so the support is all of R^4.

    The score comes from the forward sensitivity equations dS/dt = (df/dx) S + df/dtheta, solved
    with the state (a 10-dimensional ODE, ``scipy.integrate.odeint``). Cost: one ODE solve per
    evaluation (about 1000 right-hand-side calls at the default tolerance, ~2 ms).

    Parameters
    ----------
    theta : 4 positive floats
        The data-generating (a1, a2, k, alpha).
    sigma : float
        Observation noise sd, positive.
    times : array, optional
        Observation times (default 41, ..., 80).
    seed : int
        Seed of the observation noise.
    rtol, atol : float
        Tolerances of the ODE solver.

    Attributes
    ----------
    d : int
        4, the dimension of q.
    names : tuple of str
        The coordinates' names, ``("log a1", "log a2", "log k", "log alpha")``.
    y : (T, 2) array
        The synthetic observations.

    See Also
    --------
    goodwin_chain : a biased P-MALA chain on this posterior.
    mala : samples any target with a ``log_density_and_score``.

    Examples
    --------
    >>> from stein_coreset.datasets import Goodwin
    >>> target = Goodwin()                              # one ODE solve for the data
    >>> lp, score = target.log_density_and_score(target.q_true)
    >>> round(lp, 1), score.round(1)
    (-42.0, array([ 9.6, -8.4,  1.5, -8.5]))
    >>> target.laplace_covariance().shape              # a P-MALA preconditioner
    (4, 4)
    """

    d = 4
    rho = 10.0
    names = ("log a1", "log a2", "log k", "log alpha")

    def __init__(
        self,
        theta=GOODWIN_THETA,
        sigma: float = 0.1,
        times=None,
        seed: int = 0,
        rtol: float = 1e-6,
        atol: float = 1e-9,
    ):
        self.theta = np.asarray(theta, dtype=np.float64)
        if self.theta.shape != (4,) or not np.all(self.theta > 0):
            raise ValueError(f"theta must be 4 positive numbers, got {theta!r}")
        if not sigma > 0:
            raise ValueError(f"sigma must be positive, got {sigma!r}")
        self.sigma = float(sigma)
        self.times = np.arange(41.0, 81.0) if times is None else np.asarray(times, np.float64)
        self.rtol, self.atol = float(rtol), float(atol)
        x, _ = self.solve(self.theta)
        rng = np.random.default_rng(seed)
        self.y = x + self.sigma * rng.standard_normal(x.shape)

    @property
    def q_true(self) -> np.ndarray:
        """log of the data-generating parameters."""
        return np.log(self.theta)

    def _rhs(self, theta):
        a1, a2, k, al = (float(v) for v in theta)
        rho = self.rho

        def rhs(t, z):
            x1, x2 = z[0], z[1]
            x2r1 = x2 ** (rho - 1.0) if x2 > 0.0 else 0.0
            x2r = x2r1 * x2
            den = 1.0 / (1.0 + a2 * x2r)
            j12 = -a1 * a2 * rho * x2r1 * den * den  # d f1 / d x2
            s10, s11, s12, s13, s20, s21, s22, s23 = z[2:].tolist()
            return [
                a1 * den - al * x1,
                k * x1 - al * x2,
                # d/dt dx1/dtheta = -alpha s1 + j12 s2 + d f1/d theta
                -al * s10 + j12 * s20 + den,
                -al * s11 + j12 * s21 - a1 * x2r * den * den,
                -al * s12 + j12 * s22,
                -al * s13 + j12 * s23 - x1,
                # d/dt dx2/dtheta = k s1 - alpha s2 + d f2/d theta
                k * s10 - al * s20,
                k * s11 - al * s21,
                k * s12 - al * s22 + x1,
                k * s13 - al * s23 - x2,
            ]

        return rhs

    def solve(self, theta):
        """States x(t_i) (T, 2) and sensitivities dx(t_i)/dtheta (T, 2, 4) at the times."""
        from scipy.integrate import odeint

        t = np.concatenate([[0.0], self.times])
        z = odeint(
            self._rhs(theta),
            np.zeros(10),
            t,
            tfirst=True,
            rtol=self.rtol,
            atol=self.atol,
            mxstep=100_000,
        )[1:]
        return z[:, :2], z[:, 2:].reshape(-1, 2, 4)

    def log_density_and_score(self, q):
        """Unnormalised log posterior at q (4,) and its gradient (4,). One ODE solve."""
        q = np.asarray(q, dtype=np.float64)
        if not np.all(np.isfinite(q)) or np.max(q) > 30.0:
            return -math.inf, np.full(4, np.nan)
        theta = np.exp(q)
        x, sens = self.solve(theta)
        r = self.y - x
        if not np.all(np.isfinite(r)):
            return -math.inf, np.full(4, np.nan)
        s2 = self.sigma**2
        loglik = -0.5 * float(np.sum(r * r)) / s2
        # Gamma(2, 1) prior on theta in q = log theta, with the Jacobian: 2 q - exp(q)
        logprior = float(np.sum(2.0 * q - theta))
        dlik_dtheta = np.einsum("tj,tji->i", r, sens) / s2
        grad = dlik_dtheta * theta + 2.0 - theta
        return loglik + logprior, grad

    def log_density(self, Q):
        """Unnormalised log posterior at each row of Q (n, 4)."""
        Q = np.atleast_2d(np.asarray(Q, dtype=np.float64))
        return np.array([self.log_density_and_score(q)[0] for q in Q])

    def score(self, Q):
        """grad_q log posterior at each row of Q (n, 4); one ODE solve per row."""
        Q = np.atleast_2d(np.asarray(Q, dtype=np.float64))
        return np.stack([self.log_density_and_score(q)[1] for q in Q])

    def laplace_covariance(self, q=None):
        """Inverse Gauss-Newton (Fisher) information at q (default q_true): a P-MALA preconditioner.

        H = J^T J / sigma^2 + diag(theta), J = dx/dq at the observation times (the second term is
        the prior's negative Hessian in q).
        """
        q = self.q_true if q is None else np.asarray(q, dtype=np.float64)
        theta = np.exp(q)
        _, sens = self.solve(theta)
        J = (sens * theta).reshape(-1, 4)
        H = J.T @ J / self.sigma**2 + np.diag(theta)
        C = np.linalg.inv(H)
        return 0.5 * (C + C.T)


# --------------------------------------------------------------------------------------------
# Analytic targets
# --------------------------------------------------------------------------------------------


class GaussianMixture:
    """Gaussian mixture sum_k w_k N(mu_k, Sigma_k) with analytic log density, score and draws.

    Default: three well-overlapping 2-D components (a chain started far away reaches all of them).

    Parameters
    ----------
    means : (K, d) array, optional
        Component means (all three of ``means``, ``covs``, ``weights`` default together).
    covs : (K, d, d) array, optional
        Component covariances, symmetric positive definite.
    weights : (K,) array, optional
        Component weights, normalised to sum 1 (default: equal).

    Notes
    -----
    ``log_density`` and ``score`` cost O(n K d^2) for n points.

    See Also
    --------
    gmm_chain : a biased MALA chain on the default mixture.
    Gaussian : a single correlated Gaussian.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.datasets import GaussianMixture
    >>> P = GaussianMixture()
    >>> P.d, P.weights
    (2, array([0.4 , 0.35, 0.25]))
    >>> P.log_density([[0.0, 0.0]]).round(3), P.score([[0.0, 0.0]]).round(3)
    (array([-3.712]), array([[-0.462,  1.152]]))
    >>> P.sample(100_000, rng=0).mean(axis=0).round(2)   # the mixture's mean: (-0.08, 0.45)
    array([-0.07,  0.45])
    """

    def __init__(self, means=None, covs=None, weights=None):
        if means is None:
            means = [[-1.5, 0.0], [1.5, 0.0], [0.0, 1.8]]
            covs = [
                [[0.6, 0.2], [0.2, 0.5]],
                [[0.5, -0.15], [-0.15, 0.6]],
                [[0.7, 0.0], [0.0, 0.35]],
            ]
            weights = [0.4, 0.35, 0.25]
        self.means = np.asarray(means, dtype=np.float64)
        K, d = self.means.shape
        self.covs = np.asarray(covs, dtype=np.float64).reshape(K, d, d)
        w = np.full(K, 1.0 / K) if weights is None else np.asarray(weights, dtype=np.float64)
        self.weights = w / w.sum()
        self.d = d
        self.prec = np.linalg.inv(self.covs)
        self.chol = np.linalg.cholesky(self.covs)
        self.logdet = 2.0 * np.sum(np.log(np.diagonal(self.chol, axis1=1, axis2=2)), axis=1)

    def _components(self, X):
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        diff = X[:, None, :] - self.means[None]  # (n, K, d)
        pd = np.einsum("kij,nkj->nki", self.prec, diff)  # Sigma_k^{-1} (x - mu_k)
        logc = (
            np.log(self.weights)
            - 0.5 * np.einsum("nki,nki->nk", diff, pd)
            - 0.5 * self.logdet
            - 0.5 * self.d * math.log(2 * math.pi)
        )
        return logc, pd

    def log_density(self, X):
        """Normalised log density at each row of X (n, d)."""
        logc, _ = self._components(X)
        m = logc.max(axis=1, keepdims=True)
        return (m + np.log(np.exp(logc - m).sum(axis=1, keepdims=True)))[:, 0]

    def score(self, X):
        """grad log p at each row of X (n, d): - sum_k r_k(x) Sigma_k^{-1} (x - mu_k)."""
        logc, pd = self._components(X)
        r = np.exp(logc - logc.max(axis=1, keepdims=True))
        r /= r.sum(axis=1, keepdims=True)
        return -np.einsum("nk,nki->ni", r, pd)

    def log_density_and_score(self, x):
        """(log p(x), grad log p(x)) at one point x (d,): the form :func:`mala` takes."""
        x = np.asarray(x, dtype=np.float64)[None]
        return float(self.log_density(x)[0]), self.score(x)[0]

    def sample(self, n: int, rng=None):
        """n exact draws, (n, d); ``rng``: a seed or numpy Generator."""
        rng = np.random.default_rng(rng)
        k = rng.choice(len(self.weights), size=n, p=self.weights)
        z = rng.standard_normal((n, self.d))
        return self.means[k] + np.einsum("nij,nj->ni", self.chol[k], z)


class Gaussian:
    """N(mean, cov) with analytic log density, score and exact draws.

    ``temper(T)`` returns the tempered target p^{1/T} = N(mean, T cov): the tempering test bed
    (a chain of the tempered target is a biased sample of this one).

    Parameters
    ----------
    mean : (d,) array
        The mean.
    cov : (d, d) array
        The covariance, symmetric positive definite.

    Notes
    -----
    ``log_density`` and ``score`` cost O(n d^2) for n points.

    See Also
    --------
    GaussianMixture : a multimodal target.
    mala : samples it through ``log_density_and_score``.

    Examples
    --------
    >>> from stein_coreset.datasets import Gaussian
    >>> P = Gaussian.correlated(d=2, rho=0.5)
    >>> P.cov
    array([[1. , 0.5],
           [0.5, 1. ]])
    >>> P.score([[1.0, 0.0]]).round(3)                 # -cov^{-1} (x - mean)
    array([[-1.333,  0.667]])
    >>> P.temper(2.0).cov                               # p^(1/2)
    array([[2., 1.],
           [1., 2.]])
    """

    def __init__(self, mean, cov):
        self.mean = np.asarray(mean, dtype=np.float64)
        self.cov = np.asarray(cov, dtype=np.float64)
        self.d = self.mean.shape[0]
        if self.cov.shape != (self.d, self.d):
            raise ValueError(f"cov must be ({self.d}, {self.d}), got {self.cov.shape}")
        self.prec = np.linalg.inv(self.cov)
        self.chol = np.linalg.cholesky(self.cov)

    @classmethod
    def correlated(cls, d: int = 4, rho: float = 0.8, scales=None):
        """Equicorrelated Gaussian: unit (or given) scales, correlation rho between coordinates."""
        C = np.full((d, d), rho) + (1 - rho) * np.eye(d)
        s = np.ones(d) if scales is None else np.asarray(scales, dtype=np.float64)
        return cls(np.zeros(d), C * np.outer(s, s))

    def temper(self, T: float) -> Gaussian:
        """The tempered target p^{1/T} = N(mean, T cov)."""
        return Gaussian(self.mean, T * self.cov)

    def log_density(self, X):
        """Unnormalised log density at each row of X (n, d)."""
        D = np.atleast_2d(X) - self.mean
        return -0.5 * np.einsum("ni,ij,nj->n", D, self.prec, D)

    def score(self, X):
        """grad log p at each row of X (n, d): -cov^{-1} (x - mean)."""
        return -(np.atleast_2d(X) - self.mean) @ self.prec

    def log_density_and_score(self, x):
        """(log p(x), grad log p(x)) at one point x (d,): the form :func:`mala` takes."""
        x = np.asarray(x, dtype=np.float64)[None]
        return float(self.log_density(x)[0]), self.score(x)[0]

    def sample(self, n: int, rng=None):
        """n exact draws, (n, d); ``rng``: a seed or numpy Generator."""
        rng = np.random.default_rng(rng)
        return self.mean + rng.standard_normal((n, self.d)) @ self.chol.T


class LogisticRegression:
    """Bayesian logistic regression posterior on generated data.

    Features x_i ~ N(0, I_p) with an intercept column, labels y_i ~ Bernoulli(sigmoid(x_i^T beta*))
    for a fixed beta* drawn from N(0, I); prior beta ~ N(0, prior_var I). The parameter dimension is
    d = p + 1. ``score(B)`` is the full-data score at each row of B; ``minibatch_score`` the
    unbiased stochastic estimate an SGLD chain uses.

    Parameters
    ----------
    n_data : int
        Number of generated observations.
    p : int
        Number of features besides the intercept.
    prior_var : float
        Variance of the Gaussian prior on each coefficient.
    seed : int
        Seed of the features, beta* and the labels.

    Attributes
    ----------
    d : int
        p + 1, the dimension of beta.
    beta_true : (d,) array
        The coefficients the labels were generated from.
    F, y : arrays
        The (n_data, d) design (intercept column first) and the (n_data,) labels.

    Notes
    -----
    ``log_density`` and ``score`` cost O(m n_data d) for m points; ``minibatch_score``
    O(batch d).

    See Also
    --------
    sgld : the stochastic-gradient chain on this target.
    mala : an exact chain, through ``log_density_and_score``.

    Examples
    --------
    >>> from stein_coreset.datasets import LogisticRegression
    >>> target = LogisticRegression(n_data=200, p=2, seed=0)
    >>> mode, hessian = target.mode()
    >>> target.d, mode.round(2), target.beta_true.round(2)
    (3, array([-0.49,  0.7 , -1.42]), array([-0.36,  0.58, -1.44]))
    >>> bool(abs(target.score(mode)).max() < 1e-8)      # the score vanishes at the mode
    True
    """

    def __init__(self, n_data: int = 2000, p: int = 4, prior_var: float = 10.0, seed: int = 0):
        rng = np.random.default_rng(seed)
        F = np.concatenate([np.ones((n_data, 1)), rng.standard_normal((n_data, p))], axis=1)
        self.beta_true = rng.standard_normal(p + 1)
        prob = 1.0 / (1.0 + np.exp(-F @ self.beta_true))
        self.F = F
        self.y = (rng.random(n_data) < prob).astype(np.float64)
        self.prior_var = float(prior_var)
        self.d = p + 1
        self.n_data = n_data

    def _loglik_grad(self, B, F, y):
        Z = np.atleast_2d(B) @ F.T  # (m, N)
        ll = (y * Z - np.logaddexp(0.0, Z)).sum(axis=1)
        g = (y - 1.0 / (1.0 + np.exp(-Z))) @ F
        return ll, g

    def log_density(self, B):
        """Unnormalised log posterior at each row of B (m, d)."""
        ll, _ = self._loglik_grad(B, self.F, self.y)
        return ll - 0.5 * np.sum(np.atleast_2d(B) ** 2, axis=1) / self.prior_var

    def score(self, B):
        """Full-data grad log posterior at each row of B (m, d)."""
        _, g = self._loglik_grad(B, self.F, self.y)
        return g - np.atleast_2d(B) / self.prior_var

    def minibatch_score(self, beta, idx):
        """Unbiased estimate of the score at one beta (d,) from the data rows ``idx``."""
        _, g = self._loglik_grad(beta, self.F[idx], self.y[idx])
        return (self.n_data / len(idx)) * g[0] - beta / self.prior_var

    def log_density_and_score(self, b):
        """(log p(b), grad log p(b)) at one point b (d,): the form :func:`mala` takes."""
        b = np.asarray(b, dtype=np.float64)[None]
        return float(self.log_density(b)[0]), self.score(b)[0]

    def mode(self, iters: int = 50):
        """Posterior mode by Newton's method."""
        b = np.zeros(self.d)
        for _ in range(iters):
            z = self.F @ b
            s = 1.0 / (1.0 + np.exp(-z))
            H = (self.F * (s * (1 - s))[:, None]).T @ self.F + np.eye(self.d) / self.prior_var
            step = np.linalg.solve(H, self.score(b)[0])
            b = b + step
            if np.max(np.abs(step)) < 1e-10:
                break
        return b, H

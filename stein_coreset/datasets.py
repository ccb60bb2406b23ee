"""Simulated biased MCMC output with exact scores: the demo's and the experiments' test beds.

- :class:`Goodwin`: the posterior over the four log-parameters of the Goodwin oscillator (an ODE
  model of oscillatory enzymatic control), fitted to synthetic data generated from known
  parameters. This is the burn-in test bed of the paper (Sec. 5, App. I.3), after Riabiz et al.
  (2022, Sec. 4.1); the ODE and its sensitivity equations are solved with
  ``scipy.integrate.odeint``.
- :class:`GaussianMixture`: a 2-D Gaussian mixture with analytic scores and exact draws.
- :class:`Gaussian`: a correlated Gaussian (the tempering test bed: ``temper(T)`` is p^{1/T}).
- :class:`LogisticRegression`: a Bayesian logistic regression on generated data, with full-data
  and minibatch scores (the approximate-MCMC test bed of :func:`sgld`).
- :func:`mala`: the (preconditioned) Metropolis-adjusted Langevin algorithm, which records the
  score at every state, so a chain comes with the ``S`` that ``compress`` needs at no extra cost.
- :func:`goodwin_chain`, :func:`gmm_chain`: a single biased chain (long burn-in from a start far
  from the posterior mass) and a long reference sample, as one :class:`Chain`.

Everything here is host-side NumPy: MCMC is sequential and the ODE solver is SciPy's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Chain",
    "Goodwin",
    "GaussianMixture",
    "Gaussian",
    "LogisticRegression",
    "mala",
    "sgld",
    "goodwin_chain",
    "gmm_chain",
    "burn_in_oracle",
]


@dataclass
class Chain:
    """A simulated MCMC run.

    Attributes
    ----------
    X : (n, d) array of chain states, in order (burn-in included).
    S : (n, d) array of target scores grad log p at X.
    log_density : (n,) unnormalised log p at X (NaN where not computed).
    acceptance_rate : fraction of accepted proposals (1.0 for unadjusted samplers).
    reference : (n_ref, d) array approximately distributed as P (a long well-mixed run or exact
        draws), for the energy distance; None when not simulated.
    info : dict of run details (sampler, step size, start, target; ``burn_in``: the first state
        whose log density reaches the 1% quantile of the reference sample's).
    """

    X: np.ndarray
    S: np.ndarray
    log_density: np.ndarray
    acceptance_rate: float
    reference: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])


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
    coordinates. Data are generated once, from ``theta`` (default :data:`GOODWIN_THETA`) with the
    given seed. Prior: a1, a2, k, alpha i.i.d. Gamma(2, 1); the density is over q = log(theta),
    Jacobian included, so the support is all of R^4.

    The score comes from the forward sensitivity equations dS/dt = (df/dx) S + df/dtheta, solved
    with the state (a 10-dimensional ODE, ``scipy.integrate.odeint``). Cost: one ODE solve per
    evaluation (about 1000 right-hand-side calls at the default tolerance, ~2 ms).

    Parameters
    ----------
    theta : 4 floats, data-generating (a1, a2, k, alpha).
    sigma : observation noise.
    times : observation times (default 41, ..., 80).
    seed : seed of the observation noise.
    rtol, atol : tolerances of the ODE solver.
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
        x = np.asarray(x, dtype=np.float64)[None]
        return float(self.log_density(x)[0]), self.score(x)[0]

    def sample(self, n: int, rng=None):
        """n exact draws."""
        rng = np.random.default_rng(rng)
        k = rng.choice(len(self.weights), size=n, p=self.weights)
        z = rng.standard_normal((n, self.d))
        return self.means[k] + np.einsum("nij,nj->ni", self.chol[k], z)


class Gaussian:
    """N(mean, cov) with analytic log density, score and exact draws.

    ``temper(T)`` returns the tempered target p^{1/T} = N(mean, T cov).
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
        return Gaussian(self.mean, T * self.cov)

    def log_density(self, X):
        D = np.atleast_2d(X) - self.mean
        return -0.5 * np.einsum("ni,ij,nj->n", D, self.prec, D)

    def score(self, X):
        return -(np.atleast_2d(X) - self.mean) @ self.prec

    def log_density_and_score(self, x):
        x = np.asarray(x, dtype=np.float64)[None]
        return float(self.log_density(x)[0]), self.score(x)[0]

    def sample(self, n: int, rng=None):
        rng = np.random.default_rng(rng)
        return self.mean + rng.standard_normal((n, self.d)) @ self.chol.T


class LogisticRegression:
    """Bayesian logistic regression posterior on generated data.

    Features x_i ~ N(0, I_p) with an intercept column, labels y_i ~ Bernoulli(sigmoid(x_i^T beta*))
    for a fixed beta* drawn from N(0, I); prior beta ~ N(0, prior_var I). The parameter dimension is
    d = p + 1. ``score(B)`` is the full-data score at each row of B; ``minibatch_score`` the
    unbiased stochastic estimate an SGLD chain uses.
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
        ll, _ = self._loglik_grad(B, self.F, self.y)
        return ll - 0.5 * np.sum(np.atleast_2d(B) ** 2, axis=1) / self.prior_var

    def score(self, B):
        _, g = self._loglik_grad(B, self.F, self.y)
        return g - np.atleast_2d(B) / self.prior_var

    def minibatch_score(self, beta, idx):
        _, g = self._loglik_grad(beta, self.F[idx], self.y[idx])
        return (self.n_data / len(idx)) * g[0] - beta / self.prior_var

    def log_density_and_score(self, b):
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


# --------------------------------------------------------------------------------------------
# Samplers
# --------------------------------------------------------------------------------------------


def mala(
    log_density_and_score: Callable,
    x0,
    n: int,
    step: float,
    *,
    precond=None,
    rng=None,
    progress: bool = False,
    desc: str = "MALA",
) -> Chain:
    r"""Metropolis-adjusted Langevin algorithm, preconditioned (P-MALA) when ``precond`` is given.

    Proposal y = x + (h/2) M grad log p(x) + sqrt(h) L xi, xi ~ N(0, I), M = L L^T; accepted with
    probability min(1, p(y) q(x | y) / (p(x) q(y | x))), q(y | x) = N(y; x + (h/2) M grad log p(x),
    h M). A proposal with a non-finite density is rejected. The chain is a reversible Markov chain
    with stationary law p.

    Parameters
    ----------
    log_density_and_score : callable x (d,) -> (log p(x), grad log p(x))
    x0 : (d,) start.
    n : number of states returned (x0 is the first).
    step : step size h > 0.
    precond : (d, d) SPD matrix M, optional (identity by default).
    rng : seed or numpy Generator.

    Returns
    -------
    Chain with X, S (scores at every state), log_density and the acceptance rate.

    Cost: n evaluations of ``log_density_and_score`` (the previous state's are reused).
    """
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not step > 0:
        raise ValueError(f"step must be positive, got {step!r}")
    rng = np.random.default_rng(rng)
    x = np.asarray(x0, dtype=np.float64).copy()
    d = x.shape[0]
    M = np.eye(d) if precond is None else np.asarray(precond, dtype=np.float64)
    if M.shape != (d, d):
        raise ValueError(f"precond must be ({d}, {d}), got {M.shape}")
    L = np.linalg.cholesky(M)
    Minv = np.linalg.inv(M)
    h = float(step)
    lp, g = log_density_and_score(x)
    if not math.isfinite(lp):
        raise ValueError("the log density is not finite at x0")
    X = np.empty((n, d))
    S = np.empty((n, d))
    LP = np.empty(n)
    X[0], S[0], LP[0] = x, g, lp
    accepted = 0
    steps = range(1, n)
    if progress:
        from ._progress import progress_bar

        steps = progress_bar(steps, desc=desc, total=n - 1)

    def log_q(to, frm, g_frm):
        r = to - frm - 0.5 * h * (M @ g_frm)
        return -0.5 / h * float(r @ Minv @ r)

    for t in steps:
        y = x + 0.5 * h * (M @ g) + math.sqrt(h) * (L @ rng.standard_normal(d))
        lp_y, g_y = log_density_and_score(y)
        if math.isfinite(lp_y) and np.all(np.isfinite(g_y)):
            log_a = lp_y - lp + log_q(x, y, g_y) - log_q(y, x, g)
            if math.log(rng.random() + 1e-300) < log_a:
                x, lp, g = y, lp_y, g_y
                accepted += 1
        X[t], S[t], LP[t] = x, g, lp
    info = {"sampler": "P-MALA" if precond is not None else "MALA", "step": h}
    return Chain(X, S, LP, accepted / max(n - 1, 1), info=info)


def sgld(
    target: LogisticRegression,
    x0,
    n: int,
    step: float,
    *,
    batch_size: int = 32,
    precond=None,
    rng=None,
) -> np.ndarray:
    """Stochastic-gradient Langevin dynamics (Welling & Teh 2011), preconditioned by M.

    x <- x + (h/2) M g_B(x) + sqrt(h) L xi with a minibatch score g_B: no Metropolis correction,
    so the chain is biased. Returns the (n, d) states; the full-data scores are the caller's
    (``target.score``), computed only on the points that are kept.
    """
    rng = np.random.default_rng(rng)
    x = np.asarray(x0, dtype=np.float64).copy()
    d = x.shape[0]
    M = np.eye(d) if precond is None else np.asarray(precond, dtype=np.float64)
    L = np.linalg.cholesky(M)
    X = np.empty((n, d))
    h = float(step)
    for t in range(n):
        idx = rng.integers(0, target.n_data, size=batch_size)
        g = target.minibatch_score(x, idx)
        x = x + 0.5 * h * (M @ g) + math.sqrt(h) * (L @ rng.standard_normal(d))
        X[t] = x
    return X


# --------------------------------------------------------------------------------------------
# Ready-made chains for the demo and the experiments
# --------------------------------------------------------------------------------------------

#: Start of the Goodwin chains, in theta: far from the posterior mass (a long burn-in).
GOODWIN_START = (5.0, 0.5, 5.0, 0.2)


def goodwin_chain(
    n: int = 3000,
    *,
    seed: int = 0,
    start=None,
    step: float = 0.05,
    n_reference: int = 2000,
    reference_chains: int = 4,
    target: Goodwin | None = None,
    progress: bool = False,
) -> Chain:
    """One P-MALA chain of length n on the :class:`Goodwin` posterior, started far from the mode.

    The preconditioner is the Laplace covariance at the data-generating parameter; the small step
    (h = 0.05 in that metric) gives a burn-in of a few hundred states. The reference sample
    (``n_reference`` states) is pooled from ``reference_chains`` P-MALA chains started at the
    data-generating parameter with h = 1.0, after discarding their first 100 states each.

    Cost: about (n + n_reference + 100 * reference_chains) ODE solves, ~2 ms each.
    """
    target = target or Goodwin()
    M = target.laplace_covariance()
    q0 = np.log(np.asarray(GOODWIN_START if start is None else start, dtype=np.float64))
    rng = np.random.default_rng(seed)
    chain = mala(
        target.log_density_and_score,
        q0,
        n,
        step,
        precond=M,
        rng=rng,
        progress=progress,
        desc="Goodwin P-MALA",
    )
    ref = None
    if n_reference:
        per = -(-n_reference // reference_chains)
        parts = []
        for c in range(reference_chains):
            rc = mala(
                target.log_density_and_score,
                target.q_true,
                per + 100,
                1.0,
                precond=M,
                rng=rng,
                progress=progress,
                desc=f"reference {c + 1}/{reference_chains}",
            )
            parts.append((rc.X[100:], rc.log_density[100:]))
        ref = np.concatenate([p[0] for p in parts])[:n_reference]
        chain.info["burn_in"] = _burn_in(chain.log_density, np.concatenate([p[1] for p in parts]))
    chain.reference = ref
    chain.info.update(target="goodwin", start=q0, precond="Laplace covariance at theta*")
    return chain


def gmm_chain(
    n: int = 4000,
    *,
    seed: int = 0,
    start=(9.0, -8.0),
    step: float = 0.03,
    n_reference: int = 4000,
    target: GaussianMixture | None = None,
    progress: bool = False,
) -> Chain:
    """One MALA chain of length n on a 2-D :class:`GaussianMixture`, started far from the modes.

    The reference sample is ``n_reference`` exact draws. Cost: O(n) cheap density evaluations.
    """
    target = target or GaussianMixture()
    rng = np.random.default_rng(seed)
    chain = mala(
        target.log_density_and_score,
        np.asarray(start, np.float64),
        n,
        step,
        rng=rng,
        progress=progress,
        desc="GMM MALA",
    )
    chain.reference = target.sample(n_reference, rng) if n_reference else None
    if n_reference:
        chain.info["burn_in"] = _burn_in(chain.log_density, target.log_density(chain.reference))
    chain.info.update(target="gmm", start=np.asarray(start, np.float64))
    return chain


def _burn_in(log_density, reference_log_density, q: float = 0.01) -> int:
    """First state whose log density reaches the q-quantile of the reference sample's: a
    single-chain, known-target estimate of the burn-in (for display, not for the methods)."""
    hit = np.flatnonzero(log_density >= np.quantile(reference_log_density, q))
    return int(hit[0]) if hit.size else int(log_density.shape[0])


def burn_in_oracle(chains, threshold: float = 1.1, grid: int = 60) -> int:
    """Burn-in length from several independent chains, by Gelman-Rubin diagnostics on windows.

    Brooks & Gelman's (1998) iterated rule: the burn-in is the smallest b on a geometric grid
    such that the potential scale reduction R-hat of every coordinate, computed from the states
    [b, 2b) of all chains, is below ``threshold``. A stand-in for the Vats & Knudson (2021)
    diagnostic of the paper's burn-in oracle. Cost: O(grid m n d).

    Parameters
    ----------
    chains : sequence of (n, d) arrays of equal length (at least 2).
    threshold : R-hat cut-off (1.1 is the classic choice).
    grid : number of candidate b between n/1000 and n/2.

    Returns
    -------
    b : int (n // 2 when no window passes).
    """
    C = np.stack([np.asarray(c, dtype=np.float64) for c in chains])  # (m, n, d)
    m, n, _ = C.shape
    if m < 2:
        raise ValueError("burn_in_oracle needs at least 2 chains")
    if n < 8:
        raise ValueError(f"chains must have at least 8 states, got {n}")
    for b in np.unique(np.geomspace(max(2, n // 1000), n // 2, grid).astype(int)):
        Y = C[:, b : 2 * b]
        L = Y.shape[1]
        W = Y.var(axis=1, ddof=1).mean(axis=0)
        Bv = L * Y.mean(axis=1).var(axis=0, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            rhat = np.sqrt(((L - 1) / L * W + Bv / L) / W)
        if np.all(rhat < threshold):
            return int(b)
    return int(n // 2)

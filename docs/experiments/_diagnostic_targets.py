"""Hand-written targets for the input diagnostics' study (docs/diagnostics.md, issue 53).

Curved (a banana: Haario's twisted Gaussian, in 2 and 10 dimensions), hierarchical (Neal's
funnel; eight schools in its centred form, unconstrained by log tau), heavy-tailed (Student-t),
multimodal (a Gaussian mixture) and Gaussian targets (d = 1 to 100), each with exact draws and an
analytic score (checked against central finite differences by ``check_gradients``).

Samples of each (``SAMPLES``), all with the correct scores of p:

- ``exact``: exact draws;
- ``burn-in``: a P-MALA chain started about 8 sds from the bulk, its burn-in kept;
- ``tempered``: a P-MALA chain on p^(1/T) (T = 3; less for the funnels and the Student-t
  targets, whose tempered densities are improper or far off at T = 3), started at a draw:
  biased everywhere;
- ``short``: a P-MALA chain with a step 20 times too small, started at a draw: it covers a
  small region only;
- ``thinned``: every 10th state of a 10 n-step P-MALA chain with its burn-in kept.

The chains are preconditioned by the covariance of 4000 exact draws, with step h = d^(-1/3),
halved until a pilot run from the start accepts 20% of its proposals.
"""

from __future__ import annotations

import numpy as np

EIGHT_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
EIGHT_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


class Target:
    """A target p on R^d: ``score(X)`` (n, d), ``log_density(X)`` (n,), ``sample(n, rng)``."""

    name = "target"
    d = 1
    T = 3.0  # the ``tempered`` sample's temperature (p^(1/T) must be proper)

    def log_density_and_score(self, x):
        x = np.asarray(x, dtype=np.float64)[None]
        lp = float(self.log_density(x)[0])
        return lp, self.score(x)[0]


class Banana(Target):
    """Haario's twisted Gaussian: x1 ~ N(0, a^2), x2 + b (x1^2 - a^2) ~ N(0, 1); the other
    d - 2 coordinates N(0, 1); every coordinate moved by ``shift``."""

    def __init__(self, d=2, a=10.0, b=0.1, shift=0.0):
        self.d, self.a, self.b, self.shift = d, a, b, shift
        self.name = f"banana b={b} (d={d})"

    def _u(self, X):
        Y = np.atleast_2d(X) - self.shift
        return Y, Y[:, 1] + self.b * (Y[:, 0] ** 2 - self.a**2)

    def log_density(self, X):
        Y, u = self._u(X)
        return -0.5 * Y[:, 0] ** 2 / self.a**2 - 0.5 * u**2 - 0.5 * np.sum(Y[:, 2:] ** 2, axis=1)

    def score(self, X):
        Y, u = self._u(X)
        S = -Y.copy()
        S[:, 0] = -Y[:, 0] / self.a**2 - 2.0 * self.b * Y[:, 0] * u
        S[:, 1] = -u
        return S

    def sample(self, n, rng):
        Z = rng.standard_normal((n, self.d))
        Z[:, 0] *= self.a
        Z[:, 1] -= self.b * (Z[:, 0] ** 2 - self.a**2)
        return Z + self.shift


class Funnel(Target):
    """Neal's funnel: v ~ N(0, sv^2), x_k | v ~ N(0, e^v), k = 1 .. d - 1; X = (v, x)."""

    def __init__(self, d=10, sv=3.0):
        self.d, self.sv = d, sv
        self.T = 1.2  # tempering moves v's mean by sv^2 (d - 1) (T - 1) / 2
        self.name = f"funnel sv={sv} (d={d})"

    def log_density(self, X):
        X = np.atleast_2d(X)
        v, x = X[:, 0], X[:, 1:]
        return (-0.5 * v**2 / self.sv**2 - 0.5 * (self.d - 1) * v
                - 0.5 * np.sum(x**2, axis=1) * np.exp(-v))

    def score(self, X):
        X = np.atleast_2d(X)
        v, x = X[:, 0], X[:, 1:]
        e = np.exp(-v)
        S = np.empty_like(X)
        S[:, 0] = -v / self.sv**2 - 0.5 * (self.d - 1) + 0.5 * np.sum(x**2, axis=1) * e
        S[:, 1:] = -x * e[:, None]
        return S

    def sample(self, n, rng):
        v = self.sv * rng.standard_normal(n)
        x = rng.standard_normal((n, self.d - 1)) * np.exp(0.5 * v)[:, None]
        return np.column_stack([v, x])


class EightSchoolsCentred(Target):
    """Eight schools, centred: theta_j ~ N(mu, tau), y_j ~ N(theta_j, sigma_j), mu ~ N(0, 5),
    tau ~ half-Cauchy(0, 5); unconstrained X = (theta_1..8, mu, log tau), Jacobian included.
    Exact draws: log tau from its marginal on a fine grid, then mu and theta given it."""

    d = 10
    name = "eight schools centred (d=10)"

    def log_density(self, X):
        X = np.atleast_2d(X)
        th, mu, lt = X[:, :8], X[:, 8], X[:, 9]
        tau = np.exp(lt)
        return (-0.5 * np.sum(((EIGHT_Y - th) / EIGHT_SIGMA) ** 2, axis=1)
                - 0.5 * np.sum((th - mu[:, None]) ** 2, axis=1) / tau**2 - 8.0 * lt
                - 0.5 * mu**2 / 25.0 - np.log1p(tau**2 / 25.0) + lt)

    def score(self, X):
        X = np.atleast_2d(X)
        th, mu, lt = X[:, :8], X[:, 8], X[:, 9]
        tau2 = np.exp(2.0 * lt)
        dev = th - mu[:, None]
        S = np.empty_like(X)
        S[:, :8] = (EIGHT_Y - th) / EIGHT_SIGMA**2 - dev / tau2[:, None]
        S[:, 8] = np.sum(dev, axis=1) / tau2 - mu / 25.0
        S[:, 9] = -7.0 + np.sum(dev**2, axis=1) / tau2 - 2.0 * tau2 / (25.0 + tau2)
        return S

    def _log_tau_marginal(self, lt):
        """log p(log tau | y) up to a constant: y ~ N(0, 25 11^T + diag(sigma^2 + tau^2))."""
        out = np.empty_like(lt)
        for i, t in enumerate(np.exp(lt)):
            C = 25.0 + np.diag(EIGHT_SIGMA**2 + t**2)
            sign, logdet = np.linalg.slogdet(C)
            out[i] = -0.5 * logdet - 0.5 * EIGHT_Y @ np.linalg.solve(C, EIGHT_Y)
        return out - np.log1p(np.exp(2.0 * lt) / 25.0) + lt

    def sample(self, n, rng):
        if not hasattr(self, "_grid"):
            g = np.linspace(-12.0, 5.0, 6001)
            lp = self._log_tau_marginal(g)
            p = np.exp(lp - lp.max())
            self._grid, self._cdf = g, np.cumsum(p) / p.sum()
        h = self._grid[1] - self._grid[0]
        k = np.searchsorted(self._cdf, rng.random(n))
        lt = self._grid[np.minimum(k, len(self._grid) - 1)] + h * (rng.random(n) - 0.5)
        tau2 = np.exp(2.0 * lt)
        prec = 1.0 / 25.0 + np.sum(1.0 / (EIGHT_SIGMA**2 + tau2[:, None]), axis=1)
        mean = np.sum(EIGHT_Y / (EIGHT_SIGMA**2 + tau2[:, None]), axis=1) / prec
        mu = mean + rng.standard_normal(n) / np.sqrt(prec)
        p_th = 1.0 / EIGHT_SIGMA**2 + 1.0 / tau2[:, None]
        m_th = (EIGHT_Y / EIGHT_SIGMA**2 + mu[:, None] / tau2[:, None]) / p_th
        th = m_th + rng.standard_normal((n, 8)) / np.sqrt(p_th)
        return np.column_stack([th, mu, lt])


class StudentT(Target):
    """Multivariate Student-t with nu degrees of freedom, equicorrelated scale (rho), mean m."""

    def __init__(self, d=5, nu=3.0, rho=0.5, mean=0.0):
        self.d, self.nu = d, nu
        C = np.full((d, d), rho) + (1.0 - rho) * np.eye(d)
        self.L = np.linalg.cholesky(C)
        self.P = np.linalg.inv(C)
        self.mean = np.full(d, mean, dtype=np.float64)
        self.T = 0.5 * (1.0 + (nu + d) / (nu / 2.0 + d))  # p^(1/T): a t with nu' > nu / 2
        self.name = f"Student-t nu={nu:g} (d={d})"

    def log_density(self, X):
        D = np.atleast_2d(X) - self.mean
        q = np.einsum("ni,ij,nj->n", D, self.P, D)
        return -0.5 * (self.nu + self.d) * np.log1p(q / self.nu)

    def score(self, X):
        D = np.atleast_2d(X) - self.mean
        PD = D @ self.P
        q = np.sum(D * PD, axis=1)
        return -(self.nu + self.d) * PD / (self.nu + q)[:, None]

    def sample(self, n, rng):
        z = rng.standard_normal((n, self.d)) @ self.L.T
        w = rng.chisquare(self.nu, n) / self.nu
        return self.mean + z / np.sqrt(w)[:, None]


class Mixture(Target):
    """Equal-weight mixture of K isotropic Gaussians N(mu_k, s^2 I) with well-separated means."""

    def __init__(self, d=2, K=3, sep=6.0, s=1.0, seed=7):
        self.d, self.s = d, s
        rng = np.random.default_rng(seed)
        M = rng.standard_normal((K, d))
        M /= np.linalg.norm(M, axis=1, keepdims=True)
        self.means = sep * M
        self.name = f"mixture K={K} (d={d})"

    def _logc(self, X):
        D = np.atleast_2d(X)[:, None, :] - self.means[None]
        return -0.5 * np.sum(D**2, axis=2) / self.s**2, D

    def log_density(self, X):
        lc, _ = self._logc(X)
        m = lc.max(axis=1)
        return m + np.log(np.sum(np.exp(lc - m[:, None]), axis=1))

    def score(self, X):
        lc, D = self._logc(X)
        r = np.exp(lc - lc.max(axis=1, keepdims=True))
        r /= r.sum(axis=1, keepdims=True)
        return -np.einsum("nk,nki->ni", r, D) / self.s**2

    def sample(self, n, rng):
        k = rng.integers(len(self.means), size=n)
        return self.means[k] + self.s * rng.standard_normal((n, self.d))


class Gauss(Target):
    """N(m 1, C): equicorrelated (rho), coordinate scales from 0.1 to 10 (log-spaced)."""

    def __init__(self, d=3, rho=0.5, mean=1.0, spread=True):
        self.d = d
        scales = np.logspace(-1, 1, d) if (spread and d > 1) else np.ones(d)
        C = (np.full((d, d), rho) + (1.0 - rho) * np.eye(d)) * np.outer(scales, scales)
        self.C, self.P = C, np.linalg.inv(C)
        self.L = np.linalg.cholesky(C)
        self.mean = np.full(d, mean, dtype=np.float64)
        self.name = f"Gaussian rho={rho:g} mean={mean:g} (d={d})"

    def log_density(self, X):
        D = np.atleast_2d(X) - self.mean
        return -0.5 * np.einsum("ni,ij,nj->n", D, self.P, D)

    def score(self, X):
        return -(np.atleast_2d(X) - self.mean) @ self.P

    def sample(self, n, rng):
        return self.mean + rng.standard_normal((n, self.d)) @ self.L.T


TARGETS = {
    t.name: t for t in [
        Banana(d=2), Banana(d=2, b=0.03, shift=3.0), Banana(d=10), Funnel(d=10),
        Funnel(d=3, sv=1.5), EightSchoolsCentred(), StudentT(d=5, nu=3.0),
        StudentT(d=1, nu=2.0, mean=2.0), StudentT(d=20, nu=5.0, rho=0.0),
        Mixture(d=2, K=3), Mixture(d=10, K=2, sep=8.0), Gauss(d=1, mean=0.0),
        Gauss(d=3, rho=0.5, mean=1.0), Gauss(d=10, rho=0.9, mean=0.0),
        Gauss(d=50, rho=0.5, mean=1.0), Gauss(d=100, rho=0.99, mean=0.5, spread=False),
    ]
}

SAMPLES = ("exact", "burn-in", "tempered", "short", "thinned")


def _mala(target, x0, n, rng, T=1.0, step_scale=1.0, cov=None):
    """P-MALA on p^(1/T) from x0 (scores of p returned); the step is halved (at most 30 times)
    until a 200-step pilot from x0 accepts at least 20% of its proposals."""
    from stein_coreset.datasets import mala

    d = target.d

    def tempered(x):
        lp, g = target.log_density_and_score(x)
        return lp / T, g / T

    h = step_scale * d ** (-1.0 / 3.0)
    for _ in range(30):
        pilot = mala(tempered, x0, 200, h, precond=T * cov, rng=np.random.default_rng(0))
        if pilot.acceptance_rate >= 0.2:
            break
        h *= 0.5
    ch = mala(tempered, x0, n, h, precond=T * cov, rng=rng)
    return ch.X, ch.S * T


def make(target, kind: str, n: int, seed: int):
    """(X, S): n rows of the sample ``kind`` of ``target``, with the correct scores of p."""
    rng = np.random.default_rng(seed)
    if kind == "exact":
        X = target.sample(n, rng)
        return X, target.score(X)
    ref = target.sample(4000, np.random.default_rng(12345))
    cov = np.atleast_2d(np.cov(ref.T)) + 1e-9 * np.eye(target.d)
    x_draw = target.sample(1, rng)[0]
    if kind == "burn-in":
        u = rng.standard_normal(target.d)
        u /= np.linalg.norm(u)
        sd = np.sqrt(np.diag(cov))
        x0 = np.median(ref, axis=0) + 8.0 * sd * u
        if not np.isfinite(target.log_density(x0[None])[0]):
            x0 = x_draw
        return _mala(target, x0, n, rng, cov=cov)
    if kind == "tempered":
        return _mala(target, x_draw, n, rng, T=target.T, cov=cov)
    if kind == "short":
        return _mala(target, x_draw, n, rng, step_scale=0.05, cov=cov)
    if kind == "thinned":
        u = rng.standard_normal(target.d)
        u /= np.linalg.norm(u)
        x0 = np.median(ref, axis=0) + 4.0 * np.sqrt(np.diag(cov)) * u
        if not np.isfinite(target.log_density(x0[None])[0]):
            x0 = x_draw
        X, S = _mala(target, x0, 10 * n, rng, cov=cov)
        return X[::10], S[::10]
    raise ValueError(kind)


def check_gradients(target, n=5, eps=1e-6, seed=0) -> float:
    """Largest relative error of ``score`` against central differences of ``log_density``."""
    X = target.sample(n, np.random.default_rng(seed))
    S = target.score(X)
    worst = 0.0
    for i in range(n):
        for j in range(target.d):
            e = np.zeros(target.d)
            e[j] = eps * max(1.0, abs(X[i, j]))
            fd = (target.log_density((X[i] + e)[None])[0]
                  - target.log_density((X[i] - e)[None])[0]) / (2 * e[j])
            worst = max(worst, abs(fd - S[i, j]) / max(1.0, abs(S[i, j])))
    return worst


if __name__ == "__main__":  # the gradient check
    for t in TARGETS.values():
        print(f"{t.name}: max relative error {check_gradients(t):.1e}")
    t = EightSchoolsCentred()
    X = t.sample(200000, np.random.default_rng(0))
    print(f"eight schools: mu mean {X[:, 8].mean():.2f} sd {X[:, 8].std():.2f}, tau mean "
          f"{np.exp(X[:, 9]).mean():.2f} (posteriordb's reference: 4.41, 3.31, 3.60)")

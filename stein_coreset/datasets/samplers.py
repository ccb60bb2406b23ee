"""MCMC samplers that record the score at every state: (preconditioned) MALA and SGLD, and
the :class:`Chain` they return. Host-side NumPy: MCMC is sequential."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._progress import progress_bar
from .targets import LogisticRegression

__all__ = ["Chain", "mala", "sgld"]


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

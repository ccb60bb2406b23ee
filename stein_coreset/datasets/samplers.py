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
    """A simulated MCMC run: the states, their scores, and what is known of the run.

    ``X`` and ``S`` are what :func:`stein_coreset.compress` takes; ``reference`` is there to
    measure a result against (the energy distance).

    Attributes
    ----------
    X : (n, d) array
        Chain states, in order (burn-in included).
    S : (n, d) array
        Target scores grad log p at X.
    log_density : (n,) array
        Unnormalised log p at X (NaN where not computed).
    acceptance_rate : float
        Fraction of accepted proposals (1.0 for unadjusted samplers).
    reference : (n_ref, d) array or None
        A sample approximately distributed as P (a long well-mixed run or exact draws), for
        the energy distance; None when not simulated.
    info : dict
        Run details (sampler, step size, start, target; ``burn_in``: the first state whose log
        density reaches the 1% quantile of the reference sample's).

    See Also
    --------
    mala : the sampler that returns one.
    gmm_chain, goodwin_chain : the test-bed chains.

    Examples
    --------
    >>> from stein_coreset.datasets import Gaussian, mala
    >>> P = Gaussian.correlated(d=2, rho=0.5)
    >>> chain = mala(P.log_density_and_score, [0.0, 0.0], 100, 0.8, rng=0)
    >>> chain.n, chain.X.shape, chain.S.shape, chain.reference is None
    (100, (100, 2), (100, 2), True)
    """

    X: np.ndarray
    S: np.ndarray
    log_density: np.ndarray
    acceptance_rate: float
    reference: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of states."""
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
    log_density_and_score : callable
        ``x (d,) -> (log p(x), grad log p(x))``, the log density up to a constant and its
        gradient; a non-finite value rejects the proposal.
    x0 : (d,) array
        The start; the log density must be finite there.
    n : int
        Number of states returned (x0 is the first).
    step : float
        Step size h > 0; smaller steps are accepted more often but move less.
    precond : (d, d) SPD matrix, optional
        The preconditioner M (identity by default): the proposal's covariance up to h.
    rng : None, int or numpy.random.Generator
        Seed or generator of the proposals and the accept draws.
    progress : bool
        Show a progress bar over the steps.
    desc : str
        The progress bar's label.

    Returns
    -------
    Chain
        With X, S (scores at every state, so no extra evaluation is needed for
        :func:`stein_coreset.compress`), log_density, the acceptance rate and ``info``
        (``sampler``: "MALA" or "P-MALA", ``step``).

    Notes
    -----
    Cost: n evaluations of ``log_density_and_score`` (the previous state's are reused), and
    O(n d^2) for the preconditioned proposals.

    See Also
    --------
    sgld : an unadjusted, minibatch chain (biased).
    Chain : the result.
    stein_coreset.compress : what X and S are for.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.datasets import Gaussian, mala
    >>> P = Gaussian.correlated(d=2, rho=0.5)
    >>> chain = mala(P.log_density_and_score, [0.0, 0.0], 2000, 0.8, rng=0)
    >>> round(chain.acceptance_rate, 2), chain.info
    (0.83, {'sampler': 'MALA', 'step': 0.8})
    >>> np.cov(chain.X.T).round(1)                        # P's covariance
    array([[1. , 0.5],
           [0.5, 1. ]])
    >>> bool(np.allclose(chain.S, P.score(chain.X)))      # the scores come with the states
    True
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

    x <- x + (h/2) M g_B(x) + sqrt(h) L xi with a minibatch score g_B, M = L L^T: no
    Metropolis correction, so the chain is biased (the approximate-MCMC test bed). The
    full-data scores are the caller's (``target.score``), computed only on the points that
    are kept.

    Parameters
    ----------
    target : LogisticRegression
        The posterior; its ``minibatch_score`` drives the chain.
    x0 : (d,) array
        The start (not among the returned states).
    n : int
        Number of steps, and of states returned.
    step : float
        Step size h.
    batch_size : int
        Data points per minibatch, drawn with replacement.
    precond : (d, d) SPD matrix, optional
        The preconditioner M (identity by default).
    rng : None, int or numpy.random.Generator
        Seed or generator of the minibatches and the noise.

    Returns
    -------
    (n, d) array
        The states after each step.

    Notes
    -----
    Cost: O(n batch_size d) for the minibatch scores.

    See Also
    --------
    mala : the exact (Metropolis-adjusted) chain, with scores.
    LogisticRegression : the target.

    Examples
    --------
    >>> from stein_coreset.datasets import LogisticRegression, sgld
    >>> target = LogisticRegression(n_data=200, p=2, seed=0)
    >>> mode, _ = target.mode()
    >>> X = sgld(target, mode, 500, 1e-3, batch_size=20, rng=0)
    >>> S = target.score(X)                       # full-data scores, for compress
    >>> X.shape, S.shape
    ((500, 3), (500, 3))
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

"""The test-bed chains: one biased MALA chain started far from the posterior mass, with a
long reference sample, on the Goodwin posterior and on a Gaussian mixture."""

from __future__ import annotations

import numpy as np

from .burn_in import quantile_burn_in
from .samplers import Chain, mala
from .targets import GaussianMixture, Goodwin

__all__ = ["goodwin_chain", "gmm_chain", "GOODWIN_START"]

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

    The burn-in test bed of the paper (Sec. 5, App. I.3). The preconditioner is the Laplace
    covariance at the data-generating parameter; the small step (h = 0.05 in that metric) gives
    a burn-in of a few hundred states. The reference sample (``n_reference`` states) is pooled
    from ``reference_chains`` P-MALA chains started at the data-generating parameter with
    h = 1.0, after discarding their first 100 states each.

    Parameters
    ----------
    n : int
        Length of the chain (its start included).
    seed : int
        Seed of the chain and of the reference chains.
    start : 4 floats, optional
        The start in theta = (a1, a2, k, alpha), not in its log (default
        ``GOODWIN_START``, far from the posterior mass).
    step : float
        Step size h of the chain.
    n_reference : int
        States of the reference sample; 0 simulates none (``reference`` is None, no
        ``info["burn_in"]``).
    reference_chains : int
        Independent chains the reference sample is pooled from.
    target : Goodwin, optional
        The posterior (default ``Goodwin()``: synthetic data from ``GOODWIN_THETA``).
    progress : bool
        Show a progress bar per chain.

    Returns
    -------
    Chain
        States in q = log theta with their scores; ``info["burn_in"]`` is the
        ``quantile_burn_in`` estimate when there is a
        reference.

    Notes
    -----
    Cost: about (n + n_reference + 100 * reference_chains) ODE solves, ~2 ms each.

    See Also
    --------
    Goodwin : the target.
    gmm_chain : the same kind of chain on a cheap 2-D target.
    stein_coreset.compress : what the chain's X and S are for.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.datasets import goodwin_chain
    >>> chain = goodwin_chain(40, n_reference=0)        # a short chain, no reference
    >>> chain.X.shape, chain.info["sampler"], chain.reference is None
    ((40, 4), 'P-MALA', True)
    >>> np.exp(chain.X[0])                              # the start, in theta
    array([5. , 0.5, 5. , 0.2])
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
        chain.info["burn_in"] = quantile_burn_in(chain.log_density,
                                                 np.concatenate([p[1] for p in parts]))
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

    A cheap stand-in for :func:`goodwin_chain`: the same kind of long burn-in, with analytic
    scores. The reference sample is ``n_reference`` exact draws.

    Parameters
    ----------
    n : int
        Length of the chain (its start included).
    seed : int
        Seed of the chain and of the reference draws.
    start : 2 floats
        The start, far from the mixture's modes by default.
    step : float
        Step size h of MALA.
    n_reference : int
        Exact draws of the reference sample; 0 draws none (``reference`` is None, no
        ``info["burn_in"]``).
    target : GaussianMixture, optional
        The target (default ``GaussianMixture()``, three overlapping components).
    progress : bool
        Show a progress bar over the steps.

    Returns
    -------
    Chain
        States with their scores, the reference draws and ``info["burn_in"]`` (the
        ``quantile_burn_in`` estimate).

    Notes
    -----
    Cost: O(n + n_reference) analytic density evaluations.

    See Also
    --------
    GaussianMixture : the target.
    goodwin_chain : the paper's ODE test bed.
    stein_coreset.compress : what the chain's X and S are for.

    Examples
    --------
    >>> import stein_coreset as sc
    >>> from stein_coreset.datasets import gmm_chain
    >>> chain = gmm_chain(1000, n_reference=1000, seed=0)
    >>> chain.X.shape, chain.reference.shape, chain.info["burn_in"]
    ((1000, 2), (1000, 2), 55)
    >>> chain.X[:55].mean(axis=0).round(2)             # the burn-in, far from the modes
    array([ 5.8 , -4.44])
    >>> for method in ("standard", "skt"):           # energy distance to the reference
    ...     res = sc.compress(chain.X, chain.S, size=32, method=method, seed=0)
    ...     print(method, round(sc.energy_distance(res.points, chain.reference,
    ...                                            wx=res.weights), 3))
    standard 0.132
    skt 0.015
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
        chain.info["burn_in"] = quantile_burn_in(chain.log_density,
                                                 target.log_density(chain.reference))
    chain.info.update(target="gmm", start=np.asarray(start, np.float64))
    return chain

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
        chain.info["burn_in"] = quantile_burn_in(chain.log_density,
                                                 target.log_density(chain.reference))
    chain.info.update(target="gmm", start=np.asarray(start, np.float64))
    return chain

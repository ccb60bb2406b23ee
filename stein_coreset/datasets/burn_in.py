"""Burn-in estimates: the quantile rule a simulated chain reports and the Gelman-Rubin oracle
over several chains (for display and the experiments, not for the methods)."""

from __future__ import annotations

import numpy as np

__all__ = ["quantile_burn_in", "burn_in_oracle"]


def quantile_burn_in(log_density, reference_log_density, q: float = 0.01) -> int:
    """First state whose log density reaches the q-quantile of the reference sample's.

    A single-chain, known-target estimate of the burn-in, for display and the experiments: the
    compression methods never use it (the debiased ones correct burn-in without knowing it).
    The simulated chains of this package report it as ``info["burn_in"]``.

    Parameters
    ----------
    log_density : (n,) array
        The chain's log density at each state, in order.
    reference_log_density : (n_ref,) array
        The log density at a sample of the target (exact draws or a long well-mixed run).
    q : float
        The quantile of the reference's log densities a state has to reach (default 0.01).

    Returns
    -------
    int
        The index of that first state; n when no state reaches it.

    Notes
    -----
    O(n + n_ref) (a quantile and a scan).

    See Also
    --------
    stein_coreset.datasets.burn_in_oracle : the estimate from several chains, without a
        reference sample.
    stein_coreset.datasets.gmm_chain : a chain that reports this estimate.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.datasets import Gaussian, mala
    >>> from stein_coreset.datasets.burn_in import quantile_burn_in
    >>> P = Gaussian.correlated(d=2, rho=0.5)
    >>> chain = mala(P.log_density_and_score, [8.0, -8.0], 400, 0.05, rng=0)  # far start
    >>> quantile_burn_in(chain.log_density, P.log_density(P.sample(1000, rng=1)))
    31
    """
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
    chains : sequence of (n, d) arrays
        At least 2 independent chains of equal length n >= 8, started apart.
    threshold : float
        R-hat cut-off (1.1 is the classic choice).
    grid : int
        Number of candidate b, geometrically spaced between n/1000 and n/2.

    Returns
    -------
    b : int
        The burn-in length (n // 2 when no window passes).

    See Also
    --------
    stein_coreset.datasets.burn_in.quantile_burn_in : the single-chain estimate (a reference
        sample).
    stein_coreset.datasets.mala : simulates the chains.

    Examples
    --------
    >>> from stein_coreset.datasets import Gaussian, burn_in_oracle, mala
    >>> P = Gaussian.correlated(d=2, rho=0.5)
    >>> chains = [mala(P.log_density_and_score, [8.0, -8.0 - i], 400, 0.05, rng=i).X
    ...           for i in range(4)]
    >>> burn_in_oracle(chains)
    158
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

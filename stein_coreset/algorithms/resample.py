"""Resampling simplex weights to equal weights (paper App. E: Alg. E.1-E.3)."""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from .. import _validation as val

__all__ = ["resample", "standard_thinning", "iid_thinning"]

METHODS = ("stratified_residual", "residual", "iid")


def _inverse_cdf(cum: np.ndarray, u: np.ndarray) -> np.ndarray:
    """D^{-1}_w(u) = min{i : u < sum_{j <= i} w_j} for u in [0, 1) (0-based; never an index of
    zero weight)."""
    idx = np.searchsorted(cum, u * cum[-1], side="right")
    return np.minimum(idx, cum.size - 1)


def resample(
    w, m: int, rng=None, method: str = "stratified_residual", *, check_input: bool = True
) -> np.ndarray:
    """Turn simplex weights w into an equal-weighted multiset of m indices (App. E).

    - ``"iid"`` (Alg. E.1): m i.i.d. draws from w.
    - ``"residual"`` (Alg. E.2): keep floor(m w_i) copies of i, then draw the remaining
      r = m - sum_i floor(m w_i) i.i.d. from the residual weights eta_i proportional to
      m w_i - floor(m w_i).
    - ``"stratified_residual"`` (Alg. E.3, Resample; Douc & Cappe, 2005): as residual, but the
      j-th residual draw is U_j ~ Uniform([(j-1)/r, j/r)).

    Parameters
    ----------
    w : (n,) array of any array-API namespace
        Non-negative weights summing to 1 (copied to the host once).
    m : int
        Number of output indices.
    rng : numpy.random.Generator or int, optional
        Source of the draws (an int seeds a new generator).
    method : {"stratified_residual", "residual", "iid"}
        The scheme above; the default has the smallest variance of the three.
    check_input : bool
        Validate the arguments (default); ``False`` trusts them (``w`` simplex weights, ``rng``
        a Generator).

    Returns
    -------
    (m,) int64 NumPy array of indices, sorted, with repeats; the equal-weighted output puts
    weight (count of i) / m on i.

    Notes
    -----
    O(n + m log n) time, O(n + m) memory.

    See Also
    --------
    low_rank_debias : simplex weights that LSKT resamples to an equal-weighted sequence.
    low_rank_stein_kernel_thinning : LSKT, which calls this between debiasing and thinning.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.algorithms import resample
    >>> resample(np.array([0.5, 0.3, 0.2, 0.0]), 10, rng=0)   # 5, 3 and 2 copies
    array([0, 0, 0, 0, 0, 1, 1, 1, 2, 2])
    >>> resample(np.full(4, 0.25), 8, rng=0)                  # equal weights: 2 copies each
    array([0, 0, 1, 1, 2, 2, 3, 3])
    """
    if not check_input:
        return _resample(aa.to_host(w), m, rng, method)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    m = val.check_int(m, "m", lo=1)
    val.check_buffer(8.0 * m, "m", f"{m} resampled indices (8 bytes each)")
    if isinstance(w, (list, tuple)):
        w = np.asarray(w, dtype=np.float64)
    xp, _ = aa.namespace(w=w)
    if w.ndim != 1 or w.shape[0] < 1:
        raise ValueError(f"w must be a non-empty one-dimensional array, got shape {tuple(w.shape)}")
    wh = aa.to_host(val.check_weights(w, int(w.shape[0]), xp, "w", simplex=True))
    return _resample(wh, m, val.check_random_state(rng, "rng"), method)


def _resample(wh: np.ndarray, m: int, gen: np.random.Generator, method="stratified_residual"):
    """:func:`resample` of validated host weights ``wh`` (float64, simplex)."""
    wh = np.maximum(wh, 0.0)
    wh = wh / wh.sum()
    n = wh.size
    if method == "iid":
        idx = _inverse_cdf(np.cumsum(wh), gen.random(m))
        return np.sort(idx).astype(np.int64)
    mw = m * wh
    base = np.floor(mw).astype(np.int64)
    # guard against floor(m w_i) summing past m through rounding
    while base.sum() > m:  # pragma: no cover - needs adversarial rounding
        base[np.argmax(base)] -= 1
    r = m - int(base.sum())
    out = np.repeat(np.arange(n, dtype=np.int64), base)
    if r > 0:
        eta = np.maximum(mw - base, 0.0)
        if not eta.sum() > 0:
            eta = wh
        if method == "residual":
            u = gen.random(r)
        else:
            u = (np.arange(r) + gen.random(r)) / r
        extra = _inverse_cdf(np.cumsum(eta), u)
        out = np.concatenate([out, extra])
    return np.sort(out).astype(np.int64)


def standard_thinning(n: int, m: int) -> np.ndarray:
    """The m indices standard thinning keeps from a sequence of n: the last of each of m equal
    blocks of [0, n) (every (n/m)-th point of a chain; Rem. 2).

    Parameters
    ----------
    n : int
        Length of the sequence (a Markov chain's draws, in order).
    m : int
        Number of indices kept.

    Returns
    -------
    (m,) int64 NumPy array, increasing (distinct when m <= n).

    Notes
    -----
    O(m) time; the ``"standard"`` method of :func:`stein_coreset.compress`.

    See Also
    --------
    iid_thinning : m indices drawn at random instead.
    stein_thinning : greedy picks that also correct a biased chain.

    Examples
    --------
    >>> from stein_coreset.algorithms import standard_thinning
    >>> standard_thinning(100, 5)
    array([19, 39, 59, 79, 99])
    """
    n = val.check_int(n, "n", lo=1)
    m = val.check_int(m, "m", lo=1)
    idx = np.floor(np.arange(m) * (n / m)).astype(np.int64) + (n // m) - 1
    return np.clip(idx, 0, n - 1)


def iid_thinning(n: int, m: int, rng=None) -> np.ndarray:
    """m distinct indices of [0, n) drawn uniformly without replacement, sorted.

    Parameters
    ----------
    n : int
        Number of points to draw from.
    m : int
        Number of indices, 1 <= m <= n.
    rng : numpy.random.Generator or int, optional
        Source of the draw.

    Returns
    -------
    (m,) int64 NumPy array, distinct and increasing.

    Notes
    -----
    O(n) time; the ``"iid"`` method of :func:`stein_coreset.compress`.

    See Also
    --------
    standard_thinning : every (n/m)-th index instead.
    resample : m draws from arbitrary simplex weights.

    Examples
    --------
    >>> from stein_coreset.algorithms import iid_thinning
    >>> iid_thinning(100, 5, rng=0)
    array([26, 30, 50, 61, 81])
    """
    n = val.check_int(n, "n", lo=1)
    m = val.check_int(m, "m", lo=1, hi=n)
    gen = val.check_random_state(rng, "rng")
    return np.sort(gen.choice(n, size=m, replace=False)).astype(np.int64)

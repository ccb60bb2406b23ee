"""Low-rank Debiasing (Alg. 2): simplex reweighting of the input in o(n^2) time."""

from __future__ import annotations

import math

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from ..kernels import KernelMatrix
from .amd import LowRankPlusDiagonal, amd
from .rpcholesky import weighted_rpcholesky

__all__ = ["low_rank_debias"]


def _resample_support(w, n: int, rng):
    """Resample (Alg. E.3) of w to n points: the support (host int64) and its weights (host)."""
    from .resample import resample

    supp, counts = np.unique(resample(w, n, rng), return_counts=True)
    return supp.astype(np.int64), counts / float(n)


def low_rank_debias(
    K: KernelMatrix,
    rank: int,
    *,
    rounds: int = 3,
    steps: int | None = None,
    rng=None,
    progress: bool = False,
    return_info: bool = False,
):
    """Simplex weights that make the input close to P in MMD_{k_P}, in sub-quadratic time (Alg. 2).

    Each of the Q adaptive rounds: Resample the previous weights to n points (Alg. E.3; the
    identity on the first round), factor the re-weighted kernel matrix with Weighted RPCholesky
    (Alg. F.1), ``K ~ F F^T``, correct the diagonal, ``K' = F F^T + diag(K - F F^T)``, and run AMD
    (Alg. F.2) on ``w^T K' w`` from the resampled weights; the aggressive step
    ``1 / (8 sum_i w_i K_ii)`` after the first round (App. I.2). A round whose AMD output is worse
    in ``w^T K' w`` than its starting weights keeps the starting weights.

    Parameters
    ----------
    K : KernelMatrix
        The n x n mean-zero kernel matrix k_P (Stein kernel, or a centred base kernel).
    rank : int
        Rank r of the Weighted RPCholesky factor (App. I.2 / SPEC: ``n^tau``, tau = 0.5).
    rounds : int
        Number of adaptive rounds Q (default 3).
    steps : int, optional
        AMD steps T per round (default ``ceil(7 sqrt(n))``).
    rng : numpy.random.Generator or seed, optional
    progress : bool
        Progress bars over the rounds, the pivots and the AMD steps.
    return_info : bool
        Also return a dict of per-round details (objectives ``w^T K' w``, pivots used).

    Returns
    -------
    w : (n,) simplex weights in K's namespace and on its device (``(w, info)`` with
        ``return_info``).

    Notes
    -----
    Cost O((d + r + T) n r) per round (Thm. 4): r kernel columns, O(n r^2) for the factor and
    O(n r) per AMD step; memory O(n r). The n x n matrix is never formed. Rounds after the first
    work on the resampled support only (at most n points, typically ~40% of them), which is
    exact: off it the reweighted matrix has zero rows and AMD keeps zero weights. Each round
    moves its weights across the host boundary once.
    """
    if not isinstance(K, KernelMatrix):
        raise TypeError(f"K must be a KernelMatrix, got {type(K).__name__}")
    n = K.n
    rank = val.check_size(rank, n, "rank")
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    if steps is None:
        steps = math.ceil(7.0 * math.sqrt(n))
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be a non-negative integer, got {steps!r}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    xp, dev = K.xp, K.device
    dg = K.diag()
    w_prev = xp.full((n,), 1.0 / n, dtype=xp.float64, device=dev)
    info = {
        "objective_start": [],
        "objective_end": [],
        "kept_start": [],
        "rank_used": [],
        "support": [],
    }
    it = range(1, int(rounds) + 1)
    if progress:
        from .._progress import progress_bar

        it = progress_bar(it, desc="low-rank debiasing (rounds)", total=int(rounds))
    for q in it:
        if q == 1:  # Resample(uniform, n) is the identity
            Ks, ds, w = K, dg, w_prev
            supp = None
        else:
            # Off the resampled support the reweighted matrix has zero rows and AMD's
            # multiplicative updates keep zero weights, so both run on the support only
            # (the same pivot draws, O(|supp| r) per AMD step instead of O(n r)).
            supp, ws = _resample_support(w_prev, n, rng)
            supp_dev = aa.as_index_array(xp, supp, dev)
            Ks, ds = K.take(supp_dev), xp.take(dg, supp_dev)
            w = aa.from_host(ws, like=dg)
        _, F = weighted_rpcholesky(Ks, w, rank, rng, progress=progress)
        Kp = LowRankPlusDiagonal(F, ds)
        wq = amd(Kp, int(steps), w, agg=q > 1, progress=progress)
        f_start, f_end = Kp.quad(w), Kp.quad(wq)
        keep_start = f_end > f_start
        if keep_start:
            wq = w
        info["objective_start"].append(f_start)
        info["objective_end"].append(min(f_start, f_end))
        info["kept_start"].append(bool(keep_start))
        info["rank_used"].append(int(F.shape[1]))
        info["support"].append(n if supp is None else int(supp.size))
        if supp is None:
            w_prev = wq
        else:
            full = np.zeros(n)
            full[supp] = aa.to_host(wq)
            w_prev = aa.from_host(full, like=dg)
    w_prev = w_prev / xp.sum(w_prev)
    return (w_prev, info) if return_info else w_prev

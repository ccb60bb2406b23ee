"""Low-rank Debiasing (Alg. 2): simplex reweighting of the input in o(n^2) time."""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from .._progress import progress_bar
from ..engine import KernelMatrix
from .amd import LowRankPlusDiagonal, amd
from .resample import resample
from .rpcholesky import weighted_rpcholesky

__all__ = ["low_rank_debias", "resampled_ksd2", "monitor_size", "ld_summary"]

STOP_RULES = ("ksd", "fixed")


def monitor_size(n: int, rank: int, check_every: int) -> int:
    """Points s of the resampled KSD that ``stop="ksd"`` watches: all n up to 2048 (exact),
    else ``sqrt(check_every n r / 16)`` clipped to [1024, 4096], so that one check (s^2 kernel
    entries, ~16 flops each) costs about as much as the ``check_every`` AMD steps it follows
    (n r each)."""
    if n <= 2048:
        return n
    return int(min(4096, max(1024, math.isqrt(check_every * n * rank // 16))))


def resampled_ksd2(K: KernelMatrix, s: int, u: float = 0.5, surrogate=None):
    """``monitor(w)``: the squared KSD ``w^T K w`` of simplex weights w, exact when w has at
    most s nonzeros, else estimated on the systematic resample of w to s points with the fixed
    offset u (positions (u + j) / s of its cumulative sum, j < s; weights c = counts / s, so two
    weight vectors are compared with common random numbers). O(n + s^2 d).

    Without ``surrogate`` the estimate is the V-statistic ``c^T K_JJ c``. With the
    :class:`LowRankPlusDiagonal` ``K' = F F^T + diag(K - F F^T)`` AMD runs on, it is
    ``w^T K' w`` (exact, O(n r)) plus the resampled off-diagonal residual ``c^T E_JJ c``,
    ``E = K - K'`` (zero diagonal): the resample then only estimates the part of K the factor
    misses, a control variate that removes most of the resampling noise (the diagonal terms
    ``c_a^2 K_aa`` of the V-statistic alone are of the order of the differences it must rank).
    """

    def monitor(w) -> float:
        wh = np.asarray(aa.to_host(w), dtype=np.float64)
        nz = np.flatnonzero(wh > 0.0)
        if nz.size <= s:
            J, c = nz, wh[nz] / wh[nz].sum()
            return K.take(J).quad(aa.from_host(c, like=K.diag()))
        cum = np.cumsum(wh)
        pos = (u + np.arange(s)) / s * cum[-1]
        idx = np.minimum(np.searchsorted(cum, pos, side="right"), wh.size - 1)
        J, counts = np.unique(idx, return_counts=True)
        c = counts / float(s)
        vstat = K.take(J).quad(aa.from_host(c, like=K.diag()))
        if surrogate is None:
            return vstat
        off = vstat - surrogate.quad(aa.from_host(c, like=surrogate.residual), rows=J)
        return surrogate.quad(w) + off

    return monitor


def _resample_support(w, n: int, rng):
    """Resample (Alg. E.3) of w to n points: the support (host int64) and its weights (host)."""

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
    stop: str = "ksd",
    check_every: int = 32,
    patience: int = 3,
    monitor_points: int | None = None,
):
    """Simplex weights that make the input close to P in MMD_{k_P}, in sub-quadratic time (Alg. 2).

    Each of the Q adaptive rounds: Resample the previous weights to n points (Alg. E.3; the
    identity on the first round), factor the re-weighted kernel matrix with Weighted RPCholesky
    (Alg. F.1), ``K ~ F F^T``, correct the diagonal, ``K' = F F^T + diag(K - F F^T)``, and run AMD
    (Alg. F.2) on ``w^T K' w`` from the resampled weights; the aggressive step
    ``1 / (8 sum_i w_i K_ii)`` after the first round (App. I.2). A round whose AMD output is worse
    in ``w^T K' w`` than its starting weights keeps the starting weights.

    AMD minimises the surrogate ``w^T K' w``, not ``w^T K w``; past a point its steps make the
    true KSD worse. ``stop="ksd"`` (default) watches the true one: every ``check_every`` steps
    it evaluates the KSD of the current weights against K on a fixed-size systematic resample
    (``resampled_ksd2``, ``monitor_size`` points; exact for small n), keeps the best
    checked iterate and ends the round after ``patience`` checks without improvement; ``steps``
    is the cap. ``stop="fixed"`` runs exactly ``steps`` AMD steps per round (the paper's rule).

    Parameters
    ----------
    K : KernelMatrix
        The n x n mean-zero kernel matrix k_P (Stein kernel, or a centred base kernel).
    rank : int
        Rank r of the Weighted RPCholesky factor (App. I.2: ``n^tau``, tau = 0.5).
    rounds : int
        Number of adaptive rounds Q (default 3).
    steps : int, optional
        AMD steps T per round (default ``ceil(7 sqrt(n))``).
    rng : numpy.random.Generator or seed, optional
        Source of the resampling and pivot draws.
    progress : bool
        Progress bars over the rounds, the pivots and the AMD steps.
    return_info : bool
        Also return a dict of per-round details (objectives ``w^T K' w``, pivots used, AMD
        steps run, seconds in RPCholesky and AMD).
    stop : {"ksd", "fixed"}
        AMD stopping rule (above).
    check_every, patience : int
        For ``stop="ksd"``: steps between checks, and checks without improvement before a round
        ends.
    monitor_points : int, optional
        For ``stop="ksd"``: the resample size s of the monitor (default ``monitor_size``).

    Returns
    -------
    w : (n,) simplex weights in K's namespace and on its device (``(w, info)`` with
        ``return_info``).

    Notes
    -----
    Cost O((d + r + T) n r) per round (Thm. 4): r kernel columns, O(n r^2) for the factor and
    O(n r) per AMD step; memory O(n r). The n x n matrix is never formed. Rounds after the first
    work on the resampled support only (at most n points, typically ~40% of them), which is
    exact: off it the reweighted matrix has zero rows and AMD keeps zero weights.

    See Also
    --------
    stein_thinning_weights : exact debiasing weights in O(n^2).
    low_rank_stein_kernel_thinning : LSKT (Alg. 3), which thins these weights.
    amd : the mirror descent of each round (Alg. F.2).

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import low_rank_debias
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))   # biased for N(0, I)
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> w = low_rank_debias(kern.bind(X, -X), 16, rng=0)
    >>> w.shape, round(float(w.sum()), 4)
    ((256,), 1.0)
    >>> round(sc.ksd(X, -X, kernel=kern), 4), round(sc.ksd(X, -X, weights=w, kernel=kern), 4)
    (0.5183, 0.1185)
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
    val.check_choice(stop, "stop", STOP_RULES)
    check_every = val.check_int(check_every, "check_every", lo=1)
    patience = val.check_int(patience, "patience", lo=1)
    if monitor_points is not None:
        monitor_points = val.check_int(monitor_points, "monitor_points", lo=1)
    xp, dev = K.xp, K.device
    dg = K.diag()
    w_prev = xp.full((n,), 1.0 / n, dtype=xp.float64, device=dev)
    info = {
        "objective_start": [],
        "objective_end": [],
        "kept_start": [],
        "rank_used": [],
        "support": [],
        "steps_run": [],
        "time_rpcholesky_s": [],
        "time_amd_s": [],
    }
    it = range(1, int(rounds) + 1)
    if progress:

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
        t0 = time.perf_counter()
        _, F = weighted_rpcholesky(Ks, w, rank, rng, progress=progress)
        t1 = time.perf_counter()
        Kp = LowRankPlusDiagonal(F, ds, backend=K.backend, n_threads=K.n_threads)
        monitor = None
        if stop == "ksd":
            s = monitor_points or monitor_size(Ks.n, int(F.shape[1]), check_every)
            monitor = resampled_ksd2(Ks, s, float(rng.random()), surrogate=Kp)
        ainfo = {}
        wq = amd(Kp, int(steps), w, agg=q > 1, progress=progress, backend=K.backend,
                 n_threads=K.n_threads, monitor=monitor, check_every=check_every,
                 patience=patience, info=ainfo)
        info["steps_run"].append(int(ainfo["steps_run"]))
        info["time_rpcholesky_s"].append(t1 - t0)
        info["time_amd_s"].append(time.perf_counter() - t1)
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
        del F, Kp, monitor  # else this round's factor is alive while the next one is built
    w_prev = w_prev / xp.sum(w_prev)
    return (w_prev, info) if return_info else w_prev


def ld_summary(info: dict) -> dict:
    """The ``res.info`` entries of a Low-rank Debiasing run (``return_info`` dict): the AMD
    steps run per round and the seconds spent in weighted RPCholesky and in AMD."""
    return {
        "ld_steps_run": list(info["steps_run"]),
        "time_rpcholesky_s": float(sum(info["time_rpcholesky_s"])),
        "time_amd_s": float(sum(info["time_amd_s"])),
    }

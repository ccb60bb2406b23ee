"""Low-rank Stein Kernel Thinning (LSKT, Alg. 3): Low-rank Debiasing (Alg. 2), Resample
(Alg. E.3), then KT-Compress++ (Alg. F.3) targeting P."""

from __future__ import annotations

import math
import time

from .. import _validation as val
from ..engine import KernelMatrix, check_kernel_matrix
from .compresspp import compresspp_plan, run_kt_compresspp
from .debias import ld_summary, low_rank_debias
from .kernel_thinning import check_delta_rule, check_swap_order, swap_stages
from .resample import resample
from .weights import equal_weights

__all__ = ["low_rank_stein_kernel_thinning"]


def low_rank_stein_kernel_thinning(
    K: KernelMatrix,
    size: int,
    rng=None,
    *,
    rank: int | None = None,
    rounds: int = 3,
    steps: int | None = None,
    stop: str = "ksd",
    g: int = 4,
    delta: float = 0.5,
    standard_thin: bool = True,
    swap_passes: int = 4,
    swap_order: str = "sorted",
    delta_rule: str = "total",
    progress: bool = False,
):
    """Low-rank Stein Kernel Thinning (LSKT, Alg. 3): Low-rank Debiasing (Alg. 2) of the input,
    Resample (Alg. E.3) to n' >= n points, then KT-Compress++ (Alg. F.3) targeting P,
    whose final KT-Swap (Alg. D.3) shortlists the Stein thinning coreset of m points too.

    Parameters
    ----------
    K : KernelMatrix
        The Stein kernel matrix k_P on the n input points, in sequence order.
    size : int
        Output size m (any integer; KT-Compress++ runs on n' = c 4^J points for m = c 2^k,
        c odd, as ``compresspp_plan`` says).
    rng : numpy.random.Generator or seed, optional
        Source of every random draw of the pipeline.
    rank : int, optional
        Rank r of Low-rank Debiasing (default ceil(sqrt(n)) of the thinned input; capped at n).
    rounds, steps : int
        Adaptive rounds Q (3) and AMD steps per round (default ceil(7 sqrt(n))), App. I.2.
    stop : {"ksd", "fixed"}
        AMD stopping rule of :func:`~stein_coreset.algorithms.low_rank_debias`.
    g : int
        Compress++ oversampling (4).
    delta : float in (0, 1)
        KT failure probability (1/2).
    standard_thin : bool
        Rem. 2: when m^2 < n, standard-thin the input to m^2 points first.
    swap_passes : int
        KT-Swap sweeps over all n points (Alg. D.3 makes one; each costs O(n m) evaluations,
        a sweep without a swap ends them). Default 4, as SKT (docs/quality.md).
    swap_order : {"sorted", "given"}
        KT-Swap's sweep order (:func:`~stein_coreset.algorithms.kt_swap`).
    delta_rule : {"total", "per_step"}
        What ``delta`` means to KT-SPLIT (:func:`kt_compresspp`).
    progress : bool
        Progress bars.

    Returns
    -------
    indices, weights, info
        Distinct increasing host indices, equal host weights (count / m) and run details.

    Notes
    -----
    O(n r (d + r) + Q T n) for Low-rank Debiasing, O(4^g n log n) kernel evaluations for
    KT-Compress++ and O(n m) for the Stein thinning baseline (Thm. 3): sub-quadratic in n.

    See Also
    --------
    stein_coreset.compress : ``method="lskt"``, with the kernel chosen for you.
    stein_kernel_thinning : SKT (Alg. 1), quadratic but often lower KSD.
    low_rank_debias : the first stage.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import low_rank_stein_kernel_thinning
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> idx, w, info = low_rank_stein_kernel_thinning(kern.bind(X, -X), 16, rng=0, g=1)
    >>> idx.size, info["rank"], info["compress_levels"], info["stages"]["winner"]
    (16, 16, 3, 'kt_compress')
    >>> round(sc.ksd(X[idx], -X[idx], weights=w, kernel=kern), 4)
    0.1931
    """
    check_kernel_matrix(K)
    size = val.check_int(size, "size", lo=1)
    rng = val.check_random_state(rng, "rng")
    g = val.check_int(g, "g", lo=0)
    delta = val.check_delta(delta)
    standard_thin = val.check_bool(standard_thin, "standard_thin")
    swap_passes = val.check_int(swap_passes, "swap_passes", lo=1)
    swap_order = check_swap_order(swap_order)
    delta_rule = check_delta_rule(delta_rule)
    progress = val.check_bool(progress, "progress")
    m, sub, n_prime, g, info = compresspp_plan(K.n, size, g=g, standard_thin=standard_thin)
    if sub is not None:
        K = K.take(sub)
    rank = math.ceil(math.sqrt(K.n)) if rank is None else val.check_int(rank, "rank", lo=1)
    rank = min(int(rank), K.n)
    t0 = time.perf_counter()
    w, ldinfo = low_rank_debias(K, rank, rounds=rounds, steps=steps, rng=rng, progress=progress,
                                stop=stop, return_info=True)
    t1 = time.perf_counter()
    seq = resample(w, n_prime, rng, check_input=False)
    idx, cinfo = run_kt_compresspp(K, seq, g, delta, rng, "stein", m, None, progress,
                                   swap_passes, swap_order, delta_rule)
    t2 = time.perf_counter()
    if sub is not None:
        idx = sub[idx]
    uniq, wts = equal_weights(idx, m)
    info.update(
        rank=rank,
        rounds=int(rounds),
        steps=int(steps) if steps is not None else math.ceil(7.0 * math.sqrt(K.n)),
        compress_levels=cinfo["compress_levels"],
        thin_rounds=cinfo["thin_rounds"],
        time_ld_s=t1 - t0,
        time_compresspp_s=t2 - t1,
        stages=swap_stages(cinfo["swap"], "kt_compress", {}),
        **ld_summary(ldinfo),
    )
    return uniq, wts, info

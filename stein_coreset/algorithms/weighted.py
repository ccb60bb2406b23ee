"""Weighted compression pipelines (Alg. 4-7): a debiasing step that gives simplex weights on the
input (Stein Thinning, or Low-rank Debiasing), then Recombination Thinning (simplex weights) or
Cholesky Thinning (constant-preserving weights) to at most m points.

=========  ==================  ==========  ====================
method     debiasing step      thinning    weights
=========  ==================  ==========  ====================
SR / SC    Stein Thinning      RT / CT     simplex / constant
LSR / LSC  Low-rank Debiasing  RT / CT     simplex / constant
RT / CT    (input weights)     RT / CT     simplex / constant
=========  ==================  ==========  ====================
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from ..engine import KernelMatrix
from .cholesky_thinning import cholesky_thinning
from .debias import ld_summary, low_rank_debias
from .recombination import recombination_thinning
from .stein_thinning import stein_thinning_weights
from .weights import stage_ksd, weighted_ksd

__all__ = ["DEBIAS_STEPS", "THIN_STEPS", "weighted_thinning", "weighted_compression"]

#: Debiasing steps: "none" (the input weights), "st" (Stein Thinning, Alg. D.1, n steps),
#: "ld" (Low-rank Debiasing, Alg. 2).
DEBIAS_STEPS = ("none", "st", "ld")
#: Thinning steps: "rt" (Recombination Thinning, Alg. 4), "ct" (Cholesky Thinning, Alg. 6).
THIN_STEPS = ("rt", "ct")


def weighted_thinning(K: KernelMatrix, w, m: int, rng=None, *, thin: str, rank=None):
    """RT (Alg. 4) or CT (Alg. 6) of the simplex weights ``w`` (None: uniform) to at most m points.

    ``rank``: the RT / CT test-vector count (None: m - 1 for RT, m for CT).

    Returns ``(indices, weights, info)``: host indices, host weights and ``{"support"}``.
    O((d + m) n m) kernel evaluations (Props. G.1, H.1).
    """
    val.check_choice(thin, "thin", THIN_STEPS)
    fn = recombination_thinning if thin == "rt" else cholesky_thinning
    idx, wts = fn(K, w, m, rank=rank, rng=rng, check_input=False)
    return idx, aa.to_host(wts), {"support": int(idx.shape[0])}


def weighted_compression(
    K: KernelMatrix,
    m: int,
    rng=None,
    *,
    debias: str,
    thin: str,
    rank: int | None = None,
    weights=None,
    rounds: int = 3,
    steps: int | None = None,
    stop: str = "ksd",
    progress: bool = False,
):
    """Debias, then thin: Stein Recombination / Stein Cholesky (Alg. 5, 7), their low-rank
    versions, or RT / CT of the (weighted) input.

    Parameters
    ----------
    K : KernelMatrix
        k_P on the n input points: the Stein kernel, or for ``debias="none"`` a base kernel
        centred at the (weighted) input.
    m : int
        Output size bound, 1 <= m <= n.
    rng : numpy.random.Generator
        Source of every random draw of the pipeline.
    debias : {"none", "st", "ld"}
        "none": the input ``weights``; "st": Stein Thinning for n steps, counts / n (O(n^2));
        "ld": Low-rank Debiasing of rank ``rank`` (default round(sqrt(n))).
    thin : {"rt", "ct"}
        "rt": Recombination Thinning (simplex weights); "ct": Cholesky Thinning
        (constant-preserving weights, any sign).
    rank : int, optional
        For "ld" the debiasing rank; otherwise the RT / CT test-vector count.
    weights : (n,) array, optional
        Validated simplex input weights (``debias="none"`` only).
    rounds, steps : int
        Low-rank Debiasing rounds Q and AMD steps (App. I.2 defaults).
    stop : {"ksd", "fixed"}
        Its AMD stopping rule (:func:`~stein_coreset.algorithms.low_rank_debias`).
    progress : bool
        Progress bars of the stages.

    Returns
    -------
    indices, weights, info
        Distinct increasing host indices, host weights summing to 1, run details.

    Notes
    -----
    The debiasing step costs O(n^2) ("st") or O(n r (d + r) + Q T n) ("ld"); the thinning step
    O((d + m) n m).

    See Also
    --------
    stein_coreset.compress : methods ``"sr"``, ``"sc"``, ``"lsr"``, ``"lsc"``, ``"rt"``, ``"ct"``.
    recombination_thinning : the ``"rt"`` step (Alg. 4).
    cholesky_thinning : the ``"ct"`` step (Alg. 6).

    Examples
    --------
    Stein Recombination (Alg. 5):

    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import weighted_compression
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> rng = np.random.default_rng(0)
    >>> idx, w, info = weighted_compression(kern.bind(X, -X), 16, rng, debias="st", thin="rt")
    >>> idx.size, round(float(w.sum()), 4), list(info["stages"])   # no competing candidates
    (16, 1.0, ['stein_thinning', 'recombination'])
    >>> round(sc.ksd(X[idx], -X[idx], weights=w, kernel=kern), 4)
    0.1864
    """
    val.check_choice(debias, "debias", DEBIAS_STEPS)
    info = {}
    thin_rank = rank
    if debias == "st":
        w = stein_thinning_weights(K, progress=progress)
    elif debias == "ld":
        ld_rank = rank if rank is not None else max(1, round(math.sqrt(K.n)))
        t0 = time.perf_counter()
        w, ldinfo = low_rank_debias(K, ld_rank, rounds=rounds, steps=steps, rng=rng,
                                    progress=progress, stop=stop, return_info=True)
        info.update(rank=ld_rank, time_ld_s=time.perf_counter() - t0, **ld_summary(ldinfo))
        thin_rank = None
    else:
        w = weights
    idx, wts, tinfo = weighted_thinning(K, w, m, rng, thin=thin, rank=thin_rank)
    if debias != "none":
        info["stages"] = _stages(K, w, idx, wts, debias, thin)
    return idx, wts, {**tinfo, **info}


def _stages(K: KernelMatrix, w, idx, wts, debias: str, thin: str) -> dict:
    """``res.info["stages"]`` of a debiased weighted pipeline: the KSD and size (distinct
    points) of the debiasing weights (:func:`~stein_coreset.algorithms.weights.stage_ksd`: None
    above ``STAGE_KSD_MAX_SUPPORT`` support points) and of the thinned result. No candidates
    compete here, so no ``"winner"``: the thinned result is what is returned."""
    w = aa.to_host(w)
    supp = np.flatnonzero(w)
    first = "stein_thinning" if debias == "st" else "low_rank_debias"
    last = "recombination" if thin == "rt" else "cholesky"
    return {
        first: {"ksd": stage_ksd(K, supp, w[supp]), "size": int(supp.size)},
        last: {"ksd": weighted_ksd(K, idx, wts), "size": int(len(idx))},
    }

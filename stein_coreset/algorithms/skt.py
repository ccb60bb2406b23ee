"""Stein Kernel Thinning (SKT, Alg. 1): Stein Thinning (Alg. D.1) to n' points, then Kernel
Thinning targeting P (Alg. D.2) down to m, with Stein thinning's first m picks as KT-Swap's extra
candidate."""

from __future__ import annotations

import math

import numpy as np

from .. import _validation as val
from ..engine import KernelMatrix, check_kernel_matrix
from .kernel_thinning import check_delta_rule, check_swap_order, kernel_thinning, swap_stages
from .resample import standard_thinning
from .stein_thinning import stein_thinning
from .weights import equal_weights, picks_ksd

__all__ = ["stein_kernel_thinning", "swap_candidates"]


def swap_candidates(d: int) -> int:
    """How many of KT-SPLIT's candidates SKT's KT-Swap refines beside the Stein thinning
    baseline by default, for points of dimension ``d``: 4 up to d = 16, 1 above.

    With Alg. D.3's one candidate the baseline won the final pick in 8 of 12 usual inputs and
    17 of 66 posteriordb chains, so KT-SPLIT's work was thrown away there; refining the best 4
    let its candidates win in all but 3 and 9 of them, the KSD lower by a median of 2.8%
    (usual) and 1.8% / 6.1% (posteriordb NUTS with a short warm-up / tempered chains), up to
    16% / 57% / 44%, and never higher (the shortlist only grows), for 19-28% more time (the
    median share of the 3 extra refinements). 8 gained 1-4 points more for twice that. A
    refinement reads one kernel column per swap, which is memory-bound: at d = 50 and 100 one
    costs 3-4 times the whole KT-SPLIT, and there the extra candidates gained nothing measurable
    (within 0.1%). ``python docs/experiments/skt_candidates.py`` has the measurement."""
    return 4 if d <= 16 else 1


def swap_candidates_of(value, d: int) -> int:
    """A validated ``swap_candidates``: a positive int, or "auto" (``swap_candidates``)."""
    if isinstance(value, str):
        val.check_choice(value, "swap_candidates", ("auto",))
        return swap_candidates(d)
    return val.check_int(value, "swap_candidates", lo=1)


def stein_kernel_thinning(
    K: KernelMatrix,
    m: int,
    rng=None,
    *,
    delta: float = 0.5,
    standard_thin: bool = True,
    swap_passes: int = 4,
    swap_order: str = "sorted",
    delta_rule: str = "total",
    swap_candidates: int | str = "auto",
    progress: bool = False,
):
    """Stein Kernel Thinning (SKT, Alg. 1): Stein Thinning for n' = m 2^ceil(log2(n/m)) steps,
    then Kernel Thinning targeting P (Alg. D.2) from the n' picks (with multiplicity) to m, with
    the first m Stein Thinning picks as KT-Swap's extra candidate.

    Parameters
    ----------
    K : KernelMatrix
        The Stein kernel matrix k_P on the n input points, in sequence order.
    m : int
        Output size.
    rng : numpy.random.Generator or seed, optional
        Source of KT-SPLIT's random signs.
    delta : float in (0, 1)
        KT failure probability.
    standard_thin : bool
        Rem. 2: when m^2 < n, standard-thin the input to m^2 points first.
    swap_passes : int
        KT-Swap sweeps (Alg. D.3 makes one). Default 4: each further sweep costs O(n m) kernel
        evaluations (a few percent of SKT's time at n = 2^16, m = 256) and the four lowered the
        KSD by 20-36% at n = 2^12..2^16 (docs/quality.md).
    swap_order : {"sorted", "given"}
        KT-Swap's sweep order (:func:`kt_swap`).
    delta_rule : {"total", "per_step"}
        What ``delta`` means to KT-SPLIT (:func:`kt_split`).
    swap_candidates : int or "auto"
        How many of KT-SPLIT's candidates (the best by KSD) KT-Swap refines beside the
        baseline; ``"auto"``: ``swap_candidates`` of d (4 or 1). Alg. 1 / D.3: 1.
    progress : bool
        Progress bars of the Stein Thinning loop, KT-SPLIT and KT-Swap.

    Returns
    -------
    indices, weights, info
        Distinct increasing host indices into K's points, host equal weights (count / m), and
        ``{"standard_thin", "n_thinned", "n_prime", "kt_rounds"}``.

    Notes
    -----
    O(n' n + n'^2) kernel evaluations on the (thinned) input of n points (Thm. 1).

    See Also
    --------
    stein_coreset.compress : ``method="skt"``, with the kernel chosen for you.
    low_rank_stein_kernel_thinning : LSKT (Alg. 3), sub-quadratic.
    stein_thinning : the first stage.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import stein_kernel_thinning
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> idx, w, info = stein_kernel_thinning(kern.bind(X, -X), 16, rng=0)
    >>> idx.size, info["n_prime"], info["stages"]["winner"]
    (16, 256, 'kt_split')
    >>> round(sc.ksd(X[idx], -X[idx], weights=w, kernel=kern), 4)
    0.1834
    """
    check_kernel_matrix(K)
    m = val.check_int(m, "m", lo=1)
    rng = val.check_random_state(rng, "rng")
    delta = val.check_delta(delta)
    standard_thin = val.check_bool(standard_thin, "standard_thin")
    swap_passes = val.check_int(swap_passes, "swap_passes", lo=1)
    swap_order = check_swap_order(swap_order)
    delta_rule = check_delta_rule(delta_rule)
    progress = val.check_bool(progress, "progress")
    shortlist = swap_candidates_of(swap_candidates, K.d)
    n = K.n
    sub = None
    if standard_thin and m * m < n:
        sub = standard_thinning(n, m * m)
        K = K.take(sub)
    t = max(0, math.ceil(math.log2(K.n / m) - 1e-12))
    n_prime = m << t
    st = stein_thinning(K, n_prime, progress=progress, check_input=False)
    idx, swap = kernel_thinning(
        K,
        m,
        indices=np.sort(st),
        delta=delta,
        rng=rng,
        baseline=st[:m],
        passes=swap_passes,
        swap_order=swap_order,
        delta_rule=delta_rule,
        shortlist=shortlist,
        check_input=False,
        progress=progress,
        return_info=True,
    )
    if sub is not None:
        idx = sub[idx]
    uniq, w = equal_weights(idx, m)
    info = {
        "standard_thin": sub is not None,
        "n_thinned": int(K.n),
        "n_prime": int(n_prime),
        "kt_rounds": int(t),
        "stages": swap_stages(swap, "kt_split", {"stein_thinning": {
            "ksd": picks_ksd(K, st), "size": int(np.unique(st).size), "picks": int(n_prime)}}),
    }
    return uniq, w, info

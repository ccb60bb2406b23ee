"""Kernel Thinning targeting P (paper Alg. D.2): KT-SPLIT (Dwivedi & Mackey, 2022, Alg. 1a)
followed by KT-Swap targeting P (Alg. D.3). The loops run on the kernel matrix's engine backend
(docs/engine.md) and never form the n x n matrix."""

from __future__ import annotations

import math

import numpy as np

from .. import _validation as val
from ..engine import KernelMatrix, check_kernel_matrix, with_threads
from .resample import standard_thinning
from .weights import equal_weights

__all__ = [
    "SWAP_ORDERS",
    "DELTA_RULES",
    "kt_split",
    "kt_swap",
    "kernel_thinning",
    "kernel_thinning_coreset",
]


#: Sweep orders of KT-Swap (see :func:`kt_swap`).
SWAP_ORDERS = ("sorted", "given")
#: Meanings of KT-SPLIT's ``delta`` (see :func:`kt_split`).
DELTA_RULES = ("total", "per_step")


def check_swap_order(order) -> str:
    """Validate a KT-Swap sweep order (one of :data:`SWAP_ORDERS`)."""
    return val.check_choice(order, "swap_order", SWAP_ORDERS)


def check_delta_rule(rule) -> str:
    """Validate a KT-SPLIT delta rule (one of :data:`DELTA_RULES`)."""
    return val.check_choice(rule, "delta_rule", DELTA_RULES)


def kt_split(
    K: KernelMatrix,
    indices,
    t: int,
    delta: float = 0.5,
    rng=None,
    *,
    uniforms=None,
    delta_rule: str = "total",
    check_input: bool = True,
    n_threads: int | None = None,
):
    """KT-SPLIT: t rounds of kernel halving of the index sequence ``indices`` (Alg. 1a of
    Dwivedi & Mackey, 2022, as called by Alg. D.2).

    Each round halves every coreset of the previous one with the self-balancing Hilbert walk
    and thresholds ``delta_i = delta / N`` (N = ``len(indices)``), so the output is 2^t coresets
    of ``N // 2**t`` indices that partition the input sequence (points left over by an odd
    coreset length are dropped). Repeated indices stand for multiplicities.

    Parameters
    ----------
    K : KernelMatrix
        The kernel used for splitting (k_P; a base kernel centred at the input splits exactly as the
        base kernel does).
    indices : (N,) int host array
        Indices into K's points, possibly with repeats.
    t : int
        Number of halving rounds, ``0 <= t`` with ``N // 2**t >= 1``.
    delta : float in (0, 1)
        Failure probability of the whole run.
    rng : numpy.random.Generator or int, optional
        Source of the random signs (same seed, same output).
    uniforms : (t * (N // 2),) float array, optional
        Explicit uniforms instead of ``rng`` (for testing): entry ``j * (N // 2) + p`` is used
        by the p-th pair of round j, coresets in order.
    delta_rule : {"total", "per_step"}
        ``"total"`` (default, the paper's Alg. D.2): ``delta`` is the failure probability of
        the whole run, and every walk step uses ``delta_i = delta / N``. ``"per_step"``:
        ``delta`` is every step's ``delta_i``, as goodpoints.jax's ``kernel_halve`` uses it: a
        lower threshold, so better-balanced halves, at the price of the run's stated failure
        probability (no longer ``delta``) and of other random draws than ``"total"``'s.
    check_input : bool
        Validate the arguments (default); ``False`` trusts them (``indices`` an int64 host
        array, ``rng`` a Generator).
    n_threads : int or None
        Threads of the compiled loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    list of 2**t int64 NumPy arrays of length ``N // 2**t``.

    Notes
    -----
    O(N^2) kernel evaluations (O(N^2 d) for the Stein kernel), O(N) memory. With ``"total"``,
    round j's threshold is ``a = max(b sigma sqrt(2 log(2 N t / (delta 2^j))), b^2)``; with
    ``"per_step"``, ``a = max(b sigma sqrt(2 log(2 / delta)), b^2)`` (1.7 b sigma instead of
    4-5 b sigma at delta = 1/2).

    See Also
    --------
    kt_swap : picks the best of the 2^t coresets and refines it.
    kernel_thinning : KT-SPLIT then KT-Swap (Alg. D.2).

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import kt_split
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X)
    >>> cores = kt_split(K, np.arange(256), 4, rng=0)   # 4 rounds: 16 coresets of 16
    >>> len(cores), cores[0].shape
    (16, (16,))
    >>> bool(np.array_equal(np.sort(np.concatenate(cores)), np.arange(256)))  # a partition
    True
    """
    K = with_threads(K, n_threads)
    if not check_input:
        return _kt_split(K, indices, t, delta, rng, uniforms, delta_rule)
    check_kernel_matrix(K)
    idx = val.check_index_array(indices, K.n, "indices")
    t = val.check_int(t, "t", lo=0)
    if t >= 64 or idx.size >> t < 1:  # 1 << t is not formed for a huge t (4300-digit limit)
        t_s = str(t) if t < 10**18 else f"a {t.bit_length()}-bit number of"
        needs = f"2^{t} = {1 << t}" if t < 64 else f"2^t > {idx.size}"
        raise ValueError(
            f"t: indices has {idx.size} entries, too few to halve t = {t_s} times (needs "
            f"{needs})"
        )
    delta = val.check_delta(delta)
    delta_rule = check_delta_rule(delta_rule)
    if uniforms is not None:
        uniforms = np.ascontiguousarray(uniforms, dtype=np.float64).ravel()
    else:
        rng = val.check_random_state(rng, "rng")
    return _kt_split(K, idx, t, delta, rng, uniforms, delta_rule)


def _kt_split(K, idx: np.ndarray, t: int, delta: float, rng, uniforms=None,
              delta_rule: str = "total", progress: bool = False):
    """:func:`kt_split` on validated arguments (``rng`` a Generator unless ``uniforms``)."""
    if delta_rule == "total" or t == 0:
        seed = 0 if uniforms is not None else int(rng.integers(2**63))
        out = K.kt_split(idx, t, delta, seed, uniforms, progress)
        return [np.array(row) for row in out]
    # "per_step": one halving (t = 1) per coreset and round; the native threshold for a t = 1
    # call on N' points is 2 log(2 N' / delta'), so delta' = N' delta gives 2 log(2 / delta).
    row = idx.size // 2
    cores = [idx]
    for j in range(t):
        nxt = []
        for l, c in enumerate(cores):
            half = c.size // 2
            u = None
            if uniforms is not None:
                u = uniforms[j * row + l * half : j * row + (l + 1) * half]
            seed = 0 if uniforms is not None else int(rng.integers(2**63))
            out = K.kt_split(c, 1, delta * c.size, seed, u)
            nxt += [np.array(out[0]), np.array(out[1])]
        cores = nxt
    return cores


def symmetrized_halvings(K: KernelMatrix, blocks: np.ndarray, delta: float, rng,
                         delta_rule: str = "total") -> np.ndarray:
    """COMPRESS's halving (Alg. F.3) of every row of the (B, N) host index array ``blocks``:
    KT-SPLIT with one round (t = 1, ``delta`` as :func:`kt_split` takes it), then one of the
    two halves kept at random. The B halvings are independent and run as one round of B
    coresets (side by side on the team or the device); ``rng`` is drawn as B calls of
    ``kt_split(K, blocks[l], 1, delta, rng)`` each followed by ``rng.integers(2)`` would draw
    it, so the result is theirs. Returns the (B, N // 2) kept halves."""
    B, N = blocks.shape
    seeds = np.empty(B, dtype=np.uint64)
    keep = np.empty(B, dtype=np.int64)
    for l in range(B):
        seeds[l] = int(rng.integers(2**63))
        keep[l] = int(rng.integers(2))
    # "per_step": a t = 1 call on N points takes delta' = N delta (see _kt_split)
    d = delta if delta_rule == "total" else delta * N
    halves = K.kt_halvings(blocks, d, seeds)
    return halves[np.arange(B), keep]


def _mmd2(K: KernelMatrix, coresets: np.ndarray) -> np.ndarray:
    """MMD^2_{k_P} of each equal-weighted coreset (row) to P; O(L m^2) kernel evaluations."""
    m = coresets.shape[1]
    return K.coreset_sums(coresets) / m**2


def kt_swap(
    K: KernelMatrix,
    candidates,
    baseline=None,
    *,
    passes: int = 1,
    order: str = "sorted",
    shortlist: int = 1,
    check_input: bool = True,
    n_threads: int | None = None,
    return_info: bool = False,
):
    """KT-Swap targeting P (Alg. D.3): best candidate, then greedy swaps lowering MMD_{k_P}.

    Picks the candidate coreset with the smallest MMD_{k_P} to P, shortlists it together with
    ``baseline`` (Alg. D.3 adds the Stein thinning coreset), and refines each shortlisted
    coreset by replacing ``I_j``, j = 1..m in turn, with the point of all n that minimises
    MMD_{k_P} (the sufficient statistic g = sum_j k_P(x_{I_j}, .) makes each swap O(n)).
    A swap is taken only when it strictly lowers the MMD, so the MMD never increases. Returns
    the shortlisted coreset with the smallest MMD after refinement.

    Parameters
    ----------
    K : KernelMatrix
        The P-mean-zero kernel k_P on the n points.
    candidates : sequence of int arrays, all of length m
        Candidate coresets (indices into K's points, repeats allowed), e.g. KT-SPLIT's output.
    baseline : int array of length m, optional
        An extra candidate refined alongside the best one.
    shortlist : int
        How many candidates, the best by MMD before swapping, are refined (Alg. D.3: 1). The
        ranking before the swaps predicts the ranking after them only loosely, so refining a
        few more lets KT-SPLIT's candidates compete with the baseline after swapping
        (docs/choosing_a_method.md); each costs one more refinement.
    passes : int
        Sweeps over the coreset (Alg. D.3 makes one; a sweep with no swap stops early).
    order : {"sorted", "given"}
        Order in which a sweep visits ``I_1..I_m`` (Alg. D.3 leaves it open): ``"sorted"``
        sorts the coreset before every sweep, so the points are visited in increasing index
        order, as goodpoints' ``kernel_swap`` does (for SKT's Stein-thinning baseline this is not
        its selection order); ``"given"`` sweeps the positions in the order given. Neither is
        better in general; docs/quality.md has the measurement behind the default.
    check_input : bool
        Validate the arguments (default); ``False`` trusts them (a list of int64 host arrays).
    n_threads : int or None
        Threads of the compiled loops (None: ``K.n_threads``); results do not depend on it.
    return_info : bool
        Also return what the swap did: ``{"candidates", "ksd_best_candidate",
        "ksd_candidate_swapped", "ksd_baseline", "ksd_baseline_swapped", "winner"}`` (KSDs are
        MMD_{k_P} of the equal-weighted coresets; ``winner`` is ``"candidate"`` or
        ``"baseline"``, the shortlisted coreset returned).

    Returns
    -------
    (m,) int64 NumPy array of indices (with repeats); with ``return_info``, ``(indices, info)``.

    Notes
    -----
    O(L m^2 + passes m n) kernel evaluations for L candidates, O(n + L m) memory.

    See Also
    --------
    kt_split : the candidates.
    kt_swap_ls : swaps with a line search on weighted coresets (Alg. G.2).

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import kt_split, kt_swap
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X)
    >>> best, info = kt_swap(K, kt_split(K, np.arange(256), 4, rng=0), return_info=True)
    >>> best.shape, info["winner"]
    ((16,), 'candidate')
    >>> round(info["ksd_best_candidate"], 4), round(info["ksd_candidate_swapped"], 4)
    (0.4562, 0.2134)
    """
    K = with_threads(K, n_threads)
    if not check_input:
        return _kt_swap(K, candidates, baseline, passes, order, return_info=return_info,
                        shortlist=shortlist)
    check_kernel_matrix(K)
    order = check_swap_order(order)
    return_info = val.check_bool(return_info, "return_info")
    if isinstance(candidates, np.ndarray) and candidates.ndim == 2:
        cands = [candidates[i] for i in range(candidates.shape[0])]
    else:
        try:
            cands = list(candidates)
        except TypeError:
            raise TypeError("candidates must be a sequence of index arrays") from None
    if not cands:
        raise ValueError("candidates must hold at least one coreset")
    cands = [val.check_index_array(c, K.n, "candidates") for c in cands]
    m = cands[0].size
    if m < 1 or any(c.size != m for c in cands):
        sizes = sorted({c.size for c in cands})
        raise ValueError(f"candidates must be non-empty and of one size, got sizes {sizes}")
    passes = val.check_int(passes, "passes", lo=1)
    shortlist = val.check_int(shortlist, "shortlist", lo=1)
    b = None
    if baseline is not None:
        b = val.check_index_array(baseline, K.n, "baseline")
        if b.size != m:
            raise ValueError(f"baseline must have the candidates' size {m}, got {b.size}")
    return _kt_swap(K, cands, b, passes, order, return_info=return_info, shortlist=shortlist)


def _ksd_of(mmd2) -> float:
    return math.sqrt(max(float(mmd2), 0.0))


def _support(I) -> int:
    return int(np.unique(I).size)


def _kt_swap(K, cands, baseline, passes: int, order: str = "sorted", progress: bool = False,
             return_info: bool = False, shortlist: int = 1):
    """:func:`kt_swap` on validated arguments (host int64 candidates of one size)."""
    C = np.stack(cands)
    before = _mmd2(K, C)
    ranked = np.argsort(before, kind="stable")[: max(1, min(int(shortlist), C.shape[0]))]
    best = int(ranked[0])
    short = [C[j].copy() for j in ranked]
    k = len(short)
    if baseline is not None:
        short.append(np.array(baseline, dtype=np.int64))
        if return_info:  # the baseline as it entered the swaps, for the report only
            before_baseline = _mmd2(K, short[-1][None, :])[0]
    for I in short:
        K.kt_swap_refine(I, passes, order == "sorted", progress)
    final = _mmd2(K, np.stack(short))
    win = int(np.argmin(final))
    if not return_info:
        return short[win]
    cwin = int(np.argmin(final[:k]))
    info = {
        "candidates": int(C.shape[0]),
        "swapped": k,
        "picks": int(C.shape[1]),
        "ksd_best_candidate": _ksd_of(before[best]),
        "size_best_candidate": _support(C[best]),
        "ksd_candidate_swapped": _ksd_of(final[cwin]),
        "size_candidate_swapped": _support(short[cwin]),
        "winner": "candidate" if win < k else "baseline",
    }
    if baseline is not None:
        info["ksd_baseline"] = _ksd_of(before_baseline)
        info["size_baseline"] = _support(baseline)
        info["ksd_baseline_swapped"] = _ksd_of(final[k])
        info["size_baseline_swapped"] = _support(short[k])
    return short[win], info


def kernel_thinning(
    K: KernelMatrix,
    m: int,
    *,
    indices=None,
    delta: float = 0.5,
    rng=None,
    baseline=None,
    passes: int = 1,
    swap_order: str = "sorted",
    delta_rule: str = "total",
    shortlist: int = 1,
    check_input: bool = True,
    n_threads: int | None = None,
    progress: bool = False,
    return_info: bool = False,
):
    """Kernel Thinning targeting P (Alg. D.2): KT-SPLIT to m points, then KT-Swap.

    Parameters
    ----------
    K : KernelMatrix
        The P-mean-zero kernel k_P on the n points.
    m : int
        Output size.
    indices : (n',) int host array, optional
        The input sequence, an index k appearing n' w_k times for an equal-weight input
        ``w in (N_0 / n')^n`` (default ``arange(n)``). ``n' / m`` must be a power of two.
    delta : float
        KT failure probability; KT-SPLIT runs with ``delta_i = delta / n'``.
    rng : numpy.random.Generator or int, optional
        Source of KT-SPLIT's random signs.
    baseline : (m,) int array, optional
        Extra candidate for KT-Swap (SKT passes the Stein thinning coreset).
    passes : int
        KT-Swap sweeps.
    swap_order : {"sorted", "given"}
        KT-Swap's sweep order (:func:`kt_swap`).
    delta_rule : {"total", "per_step"}
        What ``delta`` means to KT-SPLIT (:func:`kt_split`).
    shortlist : int
        How many of KT-SPLIT's candidates KT-Swap refines (:func:`kt_swap`; Alg. D.3: 1).
    check_input : bool
        Validate the arguments (default); ``False`` trusts them.
    n_threads : int or None
        Threads of the compiled loops (None: ``K.n_threads``); results do not depend on it.
    progress : bool
        Progress bars over the KT-SPLIT walk and the KT-Swap sweeps (stages under half a second draw
        none).
    return_info : bool
        Also return KT-Swap's report (:func:`kt_swap`'s ``return_info``).

    Returns
    -------
    (m,) int64 NumPy array of indices into K's points (with repeats); the weight of point i is
    its number of occurrences over m. With ``return_info``, ``(indices, info)``.

    Notes
    -----
    O(n'^2 + n' m + n m) kernel evaluations, O(n + n') memory.

    See Also
    --------
    stein_kernel_thinning : SKT (Alg. 1), Stein thinning then this.
    kt_compresspp : sub-quadratic Kernel Thinning (Alg. F.3).

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import kernel_thinning
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> idx = kernel_thinning(kern.bind(X, -X), 16, rng=0)    # 256 / 16 is a power of two
    >>> idx.shape, round(sc.ksd(X[idx], -X[idx], kernel=kern), 4)
    ((16,), 0.2134)
    """
    K = with_threads(K, n_threads)
    if not check_input:
        idx = np.arange(K.n, dtype=np.int64) if indices is None else indices
        return _kernel_thinning(K, m, idx, delta, rng, baseline, passes, swap_order, delta_rule,
                                progress, return_info, shortlist)
    check_kernel_matrix(K)
    m = val.check_int(m, "m", lo=1)
    if indices is None:
        idx = np.arange(K.n, dtype=np.int64)
    else:
        idx = val.check_index_array(indices, K.n, "indices")
    delta = val.check_delta(delta)
    rng = val.check_random_state(rng, "rng")
    b = None
    if baseline is not None:
        b = val.check_index_array(baseline, K.n, "baseline")
        if b.size != m:
            raise ValueError(f"baseline must have the candidates' size {m}, got {b.size}")
    passes = val.check_int(passes, "passes", lo=1)
    swap_order = check_swap_order(swap_order)
    delta_rule = check_delta_rule(delta_rule)
    progress = val.check_bool(progress, "progress")
    return_info = val.check_bool(return_info, "return_info")
    shortlist = val.check_int(shortlist, "shortlist", lo=1)
    return _kernel_thinning(K, m, idx, delta, rng, b, passes, swap_order, delta_rule, progress,
                            return_info, shortlist)


def _kernel_thinning(K, m: int, idx: np.ndarray, delta: float, rng, baseline, passes: int,
                     swap_order: str = "sorted", delta_rule: str = "total",
                     progress: bool = False, return_info: bool = False, shortlist: int = 1):
    """:func:`kernel_thinning` on validated arguments."""
    ratio = idx.size / m
    t = int(round(math.log2(ratio))) if ratio >= 1 else -1
    if t < 0 or (m << t) != idx.size:
        raise ValueError(
            f"len(indices) / m must be a power of two, got len(indices) = {idx.size}, m = {m}"
        )
    cands = _kt_split(K, idx, t, delta, rng, None, delta_rule, progress) if t > 0 else [idx]
    return _kt_swap(K, cands, baseline, passes, swap_order, progress, return_info, shortlist)


def swap_stages(swap: dict, thinned: str, before: dict) -> dict:
    """``res.info["stages"]`` of a KT pipeline from KT-Swap's report (:func:`kt_swap`'s
    ``return_info``): the stages ``before`` it, the best ``thinned`` candidate (KT-SPLIT's or
    KT-Compress++'s) and the Stein thinning baseline as they entered KT-Swap, and the swapped
    result. Each stage carries its KSD, its ``size`` (distinct points) and, for the
    equal-weighted coresets of the final comparison, its ``picks``. ``"winner"`` names the
    coreset KT-Swap kept: the one of lower KSD after swapping among the candidates and the
    baseline, all of the same number of picks (absent without a baseline: nothing compared)."""
    m = swap["picks"]
    stages = {
        **before,
        thinned: {"ksd": swap["ksd_best_candidate"], "size": swap["size_best_candidate"],
                  "picks": m, "candidates": swap["candidates"]},
    }
    swapped = {"ksd": swap["ksd_candidate_swapped"], "picks": m,
               f"ksd_{thinned}": swap["ksd_candidate_swapped"], "swapped": swap["swapped"]}
    if "ksd_baseline" in swap:
        stages["baseline"] = {"ksd": swap["ksd_baseline"], "size": swap["size_baseline"],
                              "picks": m}
        base_won = swap["winner"] == "baseline"
        swapped.update(ksd=min(swap["ksd_candidate_swapped"], swap["ksd_baseline_swapped"]),
                       ksd_baseline=swap["ksd_baseline_swapped"],
                       size=swap["size_baseline_swapped" if base_won
                                 else "size_candidate_swapped"])
        stages["kt_swap"] = swapped
        stages["winner"] = "baseline" if base_won else thinned
    else:
        swapped["size"] = swap["size_candidate_swapped"]
        stages["kt_swap"] = swapped
    return stages


def kernel_thinning_coreset(
    K: KernelMatrix, m: int, rng=None, *, delta: float = 0.5, swap_passes: int = 1,
    swap_order: str = "sorted", delta_rule: str = "total", progress: bool = False,
):
    """Kernel Thinning (Alg. D.2) of the input's own empirical distribution: the ``"kt"``
    baseline, with K the base kernel centred at the input (paper footnote 2).

    The input is standard-thinned to m 2^floor(log2(n/m)) points for KT-SPLIT; KT-Swap then
    swaps over all n points, with the standard-thinning coreset as extra candidate (as
    goodpoints does).

    Parameters
    ----------
    K : KernelMatrix
        A base kernel centred at the input
        (``stein_coreset.kernels.centred_kernel_matrix``).
    m : int
        Output size, 1 <= m <= n.
    rng : numpy.random.Generator or seed, optional
        Source of KT-SPLIT's random signs.
    delta, swap_passes, swap_order, delta_rule, progress
        As for :func:`kernel_thinning`.

    Returns
    -------
    indices, weights, info
        Distinct increasing host indices, equal weights (count / m), ``{"n_split", "kt_rounds"}``.

    Notes
    -----
    O(n_split^2 + m n) kernel evaluations.

    See Also
    --------
    kernel_thinning : the same on any k_P.
    compresspp_coreset : the sub-quadratic unbiased baseline.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import kernel_thinning_coreset
    >>> from stein_coreset.kernels import centred_kernel_matrix
    >>> X = np.random.default_rng(0).standard_normal((256, 2))
    >>> K = centred_kernel_matrix(sc.IMQ(1.0), X)
    >>> idx, w, info = kernel_thinning_coreset(K, 16, rng=0)
    >>> info
    {'n_split': 256, 'kt_rounds': 4}
    >>> round(sc.mmd(X, X[idx], kernel=sc.IMQ(1.0)), 4)
    0.0529
    """
    check_kernel_matrix(K)
    m = val.check_int(m, "m", lo=1, hi=K.n)
    rng = val.check_random_state(rng, "rng")
    delta = val.check_delta(delta)
    swap_passes = val.check_int(swap_passes, "swap_passes", lo=1)
    swap_order = check_swap_order(swap_order)
    delta_rule = check_delta_rule(delta_rule)
    n = K.n
    t = max(0, int(math.floor(math.log2(n / m) + 1e-12)))
    n_split = m << t
    seq = np.arange(n, dtype=np.int64) if n_split == n else standard_thinning(n, n_split)
    idx = kernel_thinning(
        K,
        m,
        indices=seq,
        delta=delta,
        rng=rng,
        baseline=standard_thinning(n, m),
        passes=swap_passes,
        swap_order=swap_order,
        delta_rule=delta_rule,
        check_input=False,
        progress=val.check_bool(progress, "progress"),
    )
    uniq, w = equal_weights(idx, m)
    return uniq, w, {"n_split": int(n_split), "kt_rounds": int(t)}

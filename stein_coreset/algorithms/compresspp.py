"""KT-Compress++ (Alg. F.3): Compress++ (Shetty et al., 2022) with KT-SPLIT halving, targeting P."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from .._progress import counter_bar
from ..engine import KernelMatrix, check_kernel_matrix, with_threads
from ..kernels import RadialKernel, centred_kernel_matrix
from . import kernel_thinning as _kt  # called through the module: tests patch kt_split
from .resample import resample, standard_thinning
from .stein_thinning import stein_thinning
from .weights import equal_weights

__all__ = [
    "kt_compresspp",
    "run_kt_compresspp",
    "compresspp_plan",
    "compresspp_coreset",
    "swap_target",
    "SWAP_TARGETS",
]

#: Targets of THIN / KT-Swap in the unbiased ``"compresspp"`` baseline (see :func:`swap_target`).
SWAP_TARGETS = ("input", "compress", "input_all")


def _log4(n: int) -> int | None:
    """log_4(n) when n is a power of 4, else None."""
    if n < 1 or n & (n - 1):
        return None
    b = n.bit_length() - 1
    return b // 2 if b % 2 == 0 else None


def _odd_part(m: int) -> int:
    """c odd with m = c 2^k."""
    return m >> ((m & -m).bit_length() - 1)


def _layout(n_in: int, m: int | None) -> tuple[int, int] | None:
    """(c, j) with n_in = c 4^j, c the odd part of the output size m (c = 1 when m is None),
    or None when n_in has no such form."""
    c = 1 if m is None else _odd_part(m)
    if n_in % c:
        return None
    j = _log4(n_in // c)
    return None if j is None else (c, j)


def _log2_ratio(a: int, b: int) -> int | None:
    """log_2(a / b) when a / b is a non-negative integer power of two, else None."""
    if b < 1 or a < b or a % b:
        return None
    r = a // b
    return r.bit_length() - 1 if r & (r - 1) == 0 else None


def kt_compresspp(
    K: KernelMatrix,
    *,
    indices=None,
    g: int = 4,
    delta: float = 0.5,
    rng=None,
    baseline=None,
    m: int | None = None,
    thin_kernel: Callable | None = None,
    swap_passes: int = 1,
    swap_order: str = "sorted",
    delta_rule: str = "total",
    progress: bool = False,
    return_info: bool = False,
    check_input: bool = True,
    n_threads: int | None = None,
) -> np.ndarray:
    """Compress an equal-weighted sequence of n' = c 4^j points to m points (Alg. F.3).

    COMPRESS (Shetty et al., 2022, Alg. 1), run bottom-up: the sequence is cut into n' / (c 4^g)
    consecutive blocks of c 4^g points (returned as they are); then, level by level, every four
    consecutive outputs are concatenated and halved by symmetrized KT-SPLIT (one halving round,
    one of the two halves kept at random), so a block of c 4^(g+l) inputs yields c 2^g 2^(g+l)
    points. The c 2^g 2^j = 2^g sqrt(c n') points of the last level are THINned by KT-SPLIT
    with t = log2(c 2^(g+j) / m) rounds into 2^t candidate coresets, and KT-Swap targeting P
    (Alg. D.3, with the Stein thinning baseline when ``baseline="stein"``) picks and refines
    the final one. Here c is the odd part of m (m = c 2^k): Alg. F.3 is the case c = 1, n' a
    power of 4; leaves of c 4^g points let m be any size (the paper's sizes are powers of
    two). Failure probabilities follow Lem. F.4: a halving
    of n_k points runs with ``n_k^2 delta / (4 n' 2^g (g + L 2^g))`` and THIN with
    ``g delta / (g + L 2^g)``, L = log4(n') - g the number of COMPRESS levels.

    Parameters
    ----------
    K : KernelMatrix
        The mean-zero kernel k_P on the n points (Stein kernel, or a centred base kernel; KT-SPLIT
        decisions do not depend on the centring, only KT-Swap's target does).
    indices : (n',) int host array, optional
        The input multiset S as an index sequence (index k appearing n' w_k times for an
        equal-weight input); default ``arange(n)``. ``n'`` must be c 4^j, c the odd part of
        ``m`` (a power of 4 when ``m`` is None or a power of two).
    g : int
        Oversampling parameter (App. I.2: 4).
    delta : float in (0, 1)
        Total failure probability (App. I.2: 1/2).
    rng : numpy.random.Generator or seed, optional
    baseline : (m,) int array or "stein", optional
        Extra candidate for KT-Swap. ``"stein"``: the first m Stein thinning picks over all n
        points of K (Alg. D.3's baseline; O(n m) more kernel evaluations), as LSKT uses it.
        K must then be mean-zero under P (a Stein kernel).
    m : int, optional
        Output size, default ``sqrt(n')``; ``c 2^(g+j) / m`` (or ``n' / m`` when
        ``n' <= c 4^g``) must be a power of two.
    thin_kernel : callable, optional
        ``thin_kernel(C) -> KernelMatrix`` over the COMPRESS output points ``C`` (host indices
        into K's points): THIN and KT-Swap then run on that kernel, swapping among the points
        of C only, and positions into C are mapped back. Used by the unbiased ``"compresspp"``
        baseline to target the COMPRESS output's empirical distribution, as goodpoints'
        ``compresspp_kt`` does. Default: THIN on K, KT-Swap over all n points of K.
    swap_passes : int
        KT-Swap sweeps (:func:`~stein_coreset.algorithms.kt_swap`).
    swap_order : {"sorted", "given"}
        KT-Swap's sweep order (:func:`~stein_coreset.algorithms.kt_swap`).
    delta_rule : {"total", "per_step"}
        ``"total"``: ``delta`` is split over the halvings and THIN as Lem. F.4 says;
        ``"per_step"``: every KT-SPLIT walk step uses ``delta`` itself, as goodpoints.jax does
        (:func:`~stein_coreset.algorithms.kt_split`).
    progress : bool
        A progress bar over the halving calls.
    return_info : bool
        Also return a dict (sizes, levels, number of halvings).
    check_input : bool
        Validate the arguments (default); ``False`` trusts them (``indices`` an int64 host
        array, ``rng`` a Generator).
    n_threads : int or None
        Threads of the compiled loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    (m,) int64 NumPy array of indices into K's points, with repeats: the output weight of point
    i is its number of occurrences over m (``w in (N_0 / m)^n``).

    Notes
    -----
    O(4^g n' log n') kernel evaluations for COMPRESS, O(4^g n') for THIN and O(m n) for KT-Swap
    (Thm. 5), and O(n m) for the ``"stein"`` baseline; memory O(n' + n) plus the kernel rows of
    one halving — never an n x n matrix.

    See Also
    --------
    kernel_thinning : the quadratic version (Alg. D.2).
    low_rank_stein_kernel_thinning : LSKT (Alg. 3), which ends with this.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import kt_compresspp
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> idx, info = kt_compresspp(kern.bind(X, -X), g=1, m=16, rng=0, return_info=True)
    >>> idx.shape, info["compress_levels"], info["compress_size"], info["halvings"]
    ((16,), 3, 32, 21)
    >>> round(sc.ksd(X[idx], -X[idx], kernel=kern), 4)
    0.2251
    """
    K = with_threads(K, n_threads)
    if not check_input:
        S = np.arange(K.n, dtype=np.int64) if indices is None else indices
    else:
        check_kernel_matrix(K)
        g = val.check_int(g, "g", lo=0)
        delta = val.check_delta(delta)
        rng = val.check_random_state(rng, "rng")
        if indices is None:
            S = np.arange(K.n, dtype=np.int64)
        else:
            S = val.check_index_array(indices, K.n, "indices")
        if m is not None:
            m = val.check_int(m, "m", lo=1)
        if isinstance(baseline, str):
            val.check_choice(baseline, "baseline", ("stein",))
        elif baseline is not None:
            baseline = val.check_index_array(baseline, K.n, "baseline")
        if thin_kernel is not None and baseline is not None:
            raise ValueError("baseline cannot be combined with thin_kernel")
        swap_passes = val.check_int(swap_passes, "swap_passes", lo=1)
        swap_order = _kt.check_swap_order(swap_order)
        delta_rule = _kt.check_delta_rule(delta_rule)
        progress = val.check_bool(progress, "progress")
    out, info = run_kt_compresspp(K, S, g, delta, rng, baseline, m, thin_kernel, progress,
                                  swap_passes, swap_order, delta_rule)
    return (out, info) if return_info else out


def run_kt_compresspp(K, S, g, delta, rng, baseline=None, m=None, thin_kernel=None,
                      progress=False, swap_passes=1, swap_order="sorted", delta_rule="total"):
    """:func:`kt_compresspp` on validated arguments; returns ``(indices, info)``."""
    n_in = int(S.size)
    lay = _layout(n_in, m)
    if lay is None:
        if m is None:
            want = "a power of 4 points (Alg. F.3)"
        else:
            want = f"c 4^j points, c = {_odd_part(m)} the odd part of m = {m}"
        raise ValueError(
            f"the input multiset must have {want}, got {n_in}; resample or standard-thin it first"
        )
    c, j = lay
    levels = max(0, j - g)
    if levels:
        base = c * 4**g
        C_size = c * (2**g) * (2**j)
    else:
        base = n_in
        C_size = n_in
    if m is None:
        m = 2**j
    t = _log2_ratio(C_size, m)
    if t is None:
        raise ValueError(
            f"m = {m} must be the COMPRESS output size {C_size} divided by a power of two "
            f"(n' = {n_in}, g = {g})"
        )
    denom = g + levels * 2**g
    per_total = delta_rule == "total"
    n_halvings = sum(n_in // (base * 4**lv) for lv in range(1, levels + 1))

    blocks = S.reshape(n_in // base, base)
    bar = None
    if progress and n_halvings:

        bar = counter_bar("KT-Compress++ halvings", n_halvings, unit="halvings")
    done = 0
    for _ in range(levels):
        # the level's halvings (every four consecutive outputs concatenated) as one round
        Cb = blocks.reshape(blocks.shape[0] // 4, 4 * blocks.shape[1])
        d_k = Cb.shape[1] ** 2 * delta / (4.0 * n_in * 2**g * denom) if per_total else delta
        blocks = _kt.symmetrized_halvings(K, Cb, d_k, rng, delta_rule)
        done += Cb.shape[0]
        if bar is not None:
            bar.advance_to(done)
    if bar is not None:
        bar.close()
    C = blocks.ravel()
    d_thin = delta * max(g, 1) / (max(g, 1) + levels * 2**g) if levels and per_total else delta

    if thin_kernel is None:
        KT, pos = K, C
    else:
        KT = thin_kernel(C)
        if not isinstance(KT, KernelMatrix) or KT.n != C.size:
            raise ValueError("thin_kernel(C) must return a KernelMatrix over the len(C) points")
        pos = np.arange(C.size, dtype=np.int64)
    cands = (
        _kt.kt_split(KT, pos, t, d_thin, rng, delta_rule=delta_rule, check_input=False)
        if t > 0
        else [pos]
    )
    if isinstance(baseline, str):  # "stein": Alg. D.3's Stein thinning coreset over all n points
        baseline = stein_thinning(K, m, check_input=False)
    if baseline is not None and baseline.size != m:
        raise ValueError(f"baseline must have the candidates' size {m}, got {baseline.size}")
    out, swap = _kt.kt_swap(KT, cands, baseline, passes=swap_passes, order=swap_order,
                            check_input=False, return_info=True)
    if thin_kernel is not None:
        out = C[out]
    out = np.ascontiguousarray(out, dtype=np.int64)
    info = {
        "n_prime": n_in,
        "g": g,
        "compress_levels": levels,
        "compress_size": int(C.size),
        "thin_rounds": int(t),
        "halvings": n_halvings,
        "m": m,
        "swap": swap,
    }
    return out, info


def compresspp_plan(n: int, size: int, *, g: int = 4, standard_thin: bool = True):
    """Sizes shared by LSKT (:mod:`~stein_coreset.algorithms.lskt`) and the Compress++ baseline.

    The output size is m = ``size``, written m = c 2^k with c odd. When m^2 < n and
    ``standard_thin``, the input is standard-thinned to m^2 points first (Rem. 2).
    KT-Compress++ then runs on the n' = c 4^J >= n resampled points (J the smallest such) with
    COMPRESS leaves of c 4^g' points, so its output, c 2^(g'+J) = 2^g' sqrt(c n') points, is m
    times a power of two for KT-SPLIT to halve. g' is the smallest oversampling with
    2^g' sqrt(c) >= 2^g (the paper's 2^g sqrt(n') output when c = 1, i.e. m a power of two,
    where g' = g), raised when needed so that the output holds at least m points.

    Returns
    -------
    m, sub, n_prime, g_used, info
        ``sub`` the host indices kept by standard thinning (None when the input is used whole).
    """
    m = int(size)
    c = _odd_part(m)
    k = (m // c).bit_length() - 1
    sub = standard_thinning(n, m * m) if standard_thin and m * m < n else None
    n_used = n if sub is None else m * m
    j = 0
    while c * 4**j < n_used:
        j += 1
    n_prime = c * 4**j
    g_c = 0
    while c * 4**g_c < 4 ** int(g):
        g_c += 1
    g_used = max(g_c, k - j)
    info = {
        "size_used": m,
        "standard_thin": sub is not None,
        "n_thinned": int(n_used),
        "n_prime": int(n_prime),
        "g": int(g_used),
    }
    return m, sub, n_prime, g_used, info


def swap_target(base: RadialKernel, K: KernelMatrix, target: str = "input") -> Callable:
    """The kernel THIN and KT-Swap use in the unbiased ``"compresspp"`` baseline.

    ``K`` is the plain base kernel matrix on the input points X; the returned
    ``thin_kernel(C) -> KernelMatrix`` is the base kernel on the COMPRESS output points C
    (host indices into X), centred according to ``target``:

    - ``"input"``: centred at the whole input, ``k(x, y) - m(x) - m(y)`` with the input's mean
      embedding m evaluated at C only, O(n |C|) evaluations. (The constant ``E k(Z, Z')`` is
      estimated by the mean of m over C; it moves no decision.) Centring at the whole input for
      all n points would cost O(n^2); a standard-thinned reference of s points would put the
      target O(s^-1/2) away from the input.
    - ``"compress"``: centred at C's own empirical distribution, as goodpoints'
      ``compresspp_kt`` does (O(|C|^2); measurably worse MMD to the input).

    (``"input_all"``, the exact centred kernel over all n points, needs no ``thin_kernel``:
    see :func:`compresspp_coreset`.)
    """
    val.check_choice(target, "swap_target", ("input", "compress"))
    xp, dev = K.xp, K.device

    def thin_kernel(C):
        XC = xp.take(K.U, aa.as_index_array(xp, C, dev), axis=0)
        if target == "compress":
            return centred_kernel_matrix(base, XC, n_threads=K.n_threads, check_input=False)
        mC = K.row_means(C)
        return KernelMatrix(base, XC, None, mC, float(xp.mean(mC)), n_threads=K.n_threads)

    return thin_kernel


def compresspp_coreset(
    base: RadialKernel,
    X,
    size: int,
    rng=None,
    *,
    g: int = 4,
    delta: float = 0.5,
    standard_thin: bool = True,
    swap_target: str = "input",
    swap_passes: int = 4,
    n_threads: int | None = None,
    progress: bool = False,
):
    """KT-Compress++ of the input's own empirical distribution: the unbiased ``"compresspp"``
    baseline (Shetty et al., 2022, with the KT-SPLIT halving of Alg. F.3).

    COMPRESS splits with the base kernel (KT-SPLIT's choices do not depend on the centring).
    THIN and KT-Swap then run on the 2^g sqrt(n') COMPRESS output points, with the base kernel
    centred as ``swap_target`` says (``swap_target``), or, for ``"input_all"``, with the
    exact centred kernel of the ``"kt"`` baseline (O(n^2)) and KT-Swap over all n points.
    Sizes as for LSKT (``compresspp_plan``).

    Parameters
    ----------
    base : RadialKernel
        The base kernel (already carrying its bandwidth).
    X : (n, d) array
        Validated float64 input points, in sequence order.
    size, rng, g, delta, standard_thin, progress
        As for :func:`~stein_coreset.algorithms.low_rank_stein_kernel_thinning`.
    swap_target : {"input", "compress", "input_all"}
        Which empirical distribution THIN and KT-Swap target (``swap_target``).
    swap_passes : int
        KT-Swap sweeps over the coreset (:func:`~stein_coreset.algorithms.kt_swap`); 4, as
        LSKT's: one left the MMD to the input 2-18% above the authors' ``compresspp_kt``, whose
        every halving is refined by swaps (docs/experiments/compresspp_gap.py).
    n_threads : int, optional
        Threads of the compiled loops; results do not depend on it.

    Returns
    -------
    indices, weights, info

    Notes
    -----
    O(4^g n log n) kernel evaluations for COMPRESS, O(n 2^g sqrt(n)) for the ``"input"``
    centring; O(n^2) for ``"input_all"``.

    See Also
    --------
    kernel_thinning_coreset : the quadratic unbiased baseline ``"kt"``.
    kt_compresspp : the same on any k_P.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import compresspp_coreset
    >>> X = np.random.default_rng(0).standard_normal((256, 2))
    >>> idx, w, info = compresspp_coreset(sc.IMQ(1.0), X, 16, rng=0, g=1)
    >>> idx.size, info["compress_levels"], round(float(w.sum()), 4)
    (14, 3, 1.0)
    >>> round(sc.mmd(X, X[idx], wy=w, kernel=sc.IMQ(1.0)), 4)
    0.0642
    """
    if not isinstance(base, RadialKernel):
        raise TypeError(f"base must be a RadialKernel, got {type(base).__name__}")
    size = val.check_int(size, "size", lo=1)
    rng = val.check_random_state(rng, "rng")
    g = val.check_int(g, "g", lo=0)
    delta = val.check_delta(delta)
    standard_thin = val.check_bool(standard_thin, "standard_thin")
    val.check_choice(swap_target, "swap_target", SWAP_TARGETS)
    progress = val.check_bool(progress, "progress")
    swap_passes = val.check_int(swap_passes, "swap_passes", lo=1)
    xp, dev = aa.namespace(X=X)
    n = int(X.shape[0])
    m, sub, n_prime, g, info = compresspp_plan(n, size, g=g, standard_thin=standard_thin)
    if swap_target == "input_all":
        K = centred_kernel_matrix(base, X, n_threads=n_threads)
        K = K if sub is None else K.take(sub)
        thin_kernel = None
    else:
        Xs = X if sub is None else xp.take(X, aa.as_index_array(xp, sub, dev), axis=0)
        K = KernelMatrix(base, Xs, n_threads=n_threads)
        thin_kernel = _swap_target(base, K, swap_target)
    nk = K.n
    seq = (
        np.arange(nk, dtype=np.int64)
        if n_prime == nk
        else resample(np.full(nk, 1.0 / nk), n_prime, rng, check_input=False)
    )
    idx, cinfo = run_kt_compresspp(K, seq, g, delta, rng, None, m, thin_kernel, progress,
                                   swap_passes)
    if sub is not None:
        idx = sub[idx]
    uniq, wts = equal_weights(idx, m)
    info.update(
        swap_target=swap_target,
        compress_levels=cinfo["compress_levels"],
        compress_size=cinfo["compress_size"],
        thin_rounds=cinfo["thin_rounds"],
    )
    return uniq, wts, info


_swap_target = swap_target  # the function, under a name the parameter above does not shadow

"""KT-Compress++ (Alg. F.3): Compress++ (Shetty et al., 2022) with KT-SPLIT halving, targeting P."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..kernels import KernelMatrix

__all__ = ["kt_compresspp"]


def _log4(n: int) -> int | None:
    """log_4(n) when n is a power of 4, else None."""
    if n < 1 or n & (n - 1):
        return None
    b = n.bit_length() - 1
    return b // 2 if b % 2 == 0 else None


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
    progress: bool = False,
    return_info: bool = False,
    n_threads: int | None = None,
) -> np.ndarray:
    """Compress an equal-weighted sequence of n' = 4^j points to m ~ sqrt(n') points (Alg. F.3).

    COMPRESS (Shetty et al., 2022, Alg. 1), run bottom-up: the sequence is cut into n' / 4^g
    consecutive blocks of 4^g points (returned as they are); then, level by level, every four
    consecutive outputs are concatenated and halved by symmetrized KT-SPLIT (one halving round,
    one of the two halves kept at random), so a block of 4^(g+l) inputs yields 2^g 2^(g+l)
    points. The 2^g sqrt(n') points of the last level are THINned by KT-SPLIT with
    t = log2(2^g sqrt(n') / m) rounds into 2^t candidate coresets, and KT-Swap targeting P
    (Alg. D.3) picks and refines the final one. Failure probabilities follow Lem. F.4: a halving
    of n_k points runs with ``n_k^2 delta / (4 n' 2^g (g + L 2^g))`` and THIN with
    ``g delta / (g + L 2^g)``, L = log4(n') - g the number of COMPRESS levels.

    Parameters
    ----------
    K : KernelMatrix
        The mean-zero kernel k_P on the n points (Stein kernel, or a centred base kernel; KT-SPLIT
        decisions do not depend on the centring, only KT-Swap's target does).
    indices : (n',) int host array, optional
        The input multiset S as an index sequence (index k appearing n' w_k times for an
        equal-weight input); default ``arange(n)``. ``n'`` must be a power of 4.
    g : int
        Oversampling parameter (App. I.2: 4).
    delta : float in (0, 1)
        Total failure probability (App. I.2: 1/2).
    rng : numpy.random.Generator or seed, optional
    baseline : (m,) int array, optional
        Extra candidate for KT-Swap.
    m : int, optional
        Output size, default ``sqrt(n')``; ``2^g sqrt(n') / m`` (or ``n' / m`` when
        ``n' <= 4^g``) must be a power of two.
    thin_kernel : callable, optional
        ``thin_kernel(C) -> KernelMatrix`` over the COMPRESS output points ``C`` (host indices
        into K's points): THIN and KT-Swap then run on that kernel, swapping among the points
        of C only, and positions into C are mapped back. Used by the unbiased ``"compresspp"``
        baseline to target the COMPRESS output's empirical distribution, as goodpoints'
        ``compresspp_kt`` does. Default: THIN on K, KT-Swap over all n points of K.
    progress : bool
        A progress bar over the halving calls.
    return_info : bool
        Also return a dict (sizes, levels, number of halvings).
    n_threads : int or None
        Threads of the C++ loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    (m,) int64 NumPy array of indices into K's points, with repeats: the output weight of point
    i is its number of occurrences over m (``w in (N_0 / m)^n``).

    Notes
    -----
    O(4^g n' log n') kernel evaluations for COMPRESS, O(4^g n') for THIN and O(m n) for KT-Swap
    (Thm. 5); memory O(n' + n) plus the kernel rows of one halving — never an n x n matrix.
    """
    K = K if n_threads is None else K.with_threads(n_threads)
    from .kernel_thinning import kt_split, kt_swap

    if not isinstance(K, KernelMatrix):
        raise TypeError(f"K must be a KernelMatrix, got {type(K).__name__}")
    if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 0:
        raise ValueError(f"g must be a non-negative integer, got {g!r}")
    g = int(g)
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating, np.integer)):
        raise TypeError(f"delta must be a real number, got {type(delta).__name__}")
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if indices is None:
        S = np.arange(K.n, dtype=np.int64)
    else:
        if not isinstance(indices, (np.ndarray, list, tuple, range)):
            raise TypeError(
                f"indices must be a host int array or sequence, got {type(indices).__name__}"
            )
        S = np.asarray(indices)
        if S.ndim != 1 or (S.size and not np.issubdtype(S.dtype, np.integer)):
            raise ValueError("indices must be a one-dimensional integer array")
        S = np.ascontiguousarray(S, dtype=np.int64)
        if S.size and (S.min() < 0 or S.max() >= K.n):
            raise ValueError(f"indices has entries outside [0, n) for n = {K.n}")
    n_in = int(S.size)
    j = _log4(n_in)
    if j is None:
        raise ValueError(
            f"the input multiset must have a power of 4 points (Alg. F.3), got {n_in}; "
            "resample or standard-thin it first"
        )
    levels = max(0, j - g)
    if levels:
        base = 4**g
        C_size = (2**g) * (2**j)
    else:
        base = n_in
        C_size = n_in
    if m is None:
        m = 2**j
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m must be a positive integer, got {m!r}")
    m = int(m)
    t = _log2_ratio(C_size, m)
    if t is None:
        raise ValueError(
            f"m = {m} must be the COMPRESS output size {C_size} divided by a power of two "
            f"(n' = {n_in}, g = {g})"
        )
    denom = g + levels * 2**g
    n_halvings = sum(n_in // (4 ** (g + lv)) for lv in range(1, levels + 1))

    blocks = [S[a : a + base] for a in range(0, n_in, base)]
    bar = None
    if progress and n_halvings:
        from .._progress import progress_bar

        bar = iter(progress_bar(range(n_halvings), desc="KT-Compress++ halvings"))
    for _ in range(levels):
        merged = []
        for b in range(0, len(blocks), 4):
            Cb = np.concatenate(blocks[b : b + 4])
            d_k = Cb.size**2 * delta / (4.0 * n_in * 2**g * denom)
            halves = kt_split(K, Cb, 1, delta=d_k, rng=rng)
            merged.append(halves[int(rng.integers(2))])  # symmetrized halving
            if bar is not None:
                next(bar, None)
        blocks = merged
    if bar is not None:
        next(bar, None)  # let the bar finish
    C = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
    d_thin = delta * max(g, 1) / (max(g, 1) + levels * 2**g) if levels else delta

    if thin_kernel is None:
        KT, pos = K, C
    else:
        KT = thin_kernel(C)
        if not isinstance(KT, KernelMatrix) or KT.n != C.size:
            raise ValueError("thin_kernel(C) must return a KernelMatrix over the len(C) points")
        pos = np.arange(C.size, dtype=np.int64)
    cands = kt_split(KT, pos, t, delta=d_thin, rng=rng) if t > 0 else [pos]
    if thin_kernel is not None and baseline is not None:
        raise ValueError("baseline cannot be combined with thin_kernel")
    out = kt_swap(KT, cands, baseline=baseline)
    if thin_kernel is not None:
        out = C[out]
    out = np.ascontiguousarray(out, dtype=np.int64)
    if return_info:
        info = {
            "n_prime": n_in,
            "g": g,
            "compress_levels": levels,
            "compress_size": int(C.size),
            "thin_rounds": int(t),
            "halvings": n_halvings,
            "m": m,
        }
        return out, info
    return out

"""Kernel Thinning targeting P (paper Alg. D.2): KT-SPLIT (Dwivedi & Mackey, 2022, Alg. 1a)
followed by KT-Swap targeting P (Alg. D.3). The serial loops are C++ (src_cpp/kt_split,
src_cpp/kt_swap) evaluating k_P from host copies of the points; no n x n matrix is formed."""

from __future__ import annotations

import math

import numpy as np

from ..kernels import KernelMatrix
from . import _native
from .stein_thinning import _check_kernel, _check_m

__all__ = ["kt_split", "kt_swap", "kernel_thinning"]


def _rng(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be None, an int seed or a numpy.random.Generator, got {rng!r}")


def _check_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating, np.integer)):
        raise TypeError(f"delta must be a real number, got {type(delta).__name__}")
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    return delta


def _index_array(idx, n: int, name: str) -> np.ndarray:
    if not isinstance(idx, (np.ndarray, list, tuple, range)):
        raise TypeError(f"{name} must be a host int array or sequence, got {type(idx).__name__}")
    a = np.asarray(idx)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.size and (a.min() < 0 or a.max() >= n):
        raise ValueError(f"{name} has entries outside [0, n) for n = {n}")
    return a


def kt_split(
    K: KernelMatrix,
    indices,
    t: int,
    delta: float = 0.5,
    rng=None,
    *,
    uniforms=None,
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
        The kernel used for splitting (k_P; a base kernel centred at the input splits exactly as
        the base kernel does).
    indices : (N,) int host array
        Indices into K's points, possibly with repeats.
    t : int
        Number of halving rounds, ``0 <= t`` with ``N // 2**t >= 1``.
    delta : float in (0, 1)
        Failure probability of the whole run.
    rng : numpy.random.Generator or int, optional
        Source of one 64-bit seed for the C++ streams (same seed, same output).
    uniforms : (t * (N // 2),) float array, optional
        Explicit uniforms instead of ``rng`` (for testing): entry ``j * (N // 2) + p`` is used
        by the p-th pair of round j, coresets in order.
    n_threads : int or None
        Threads of the C++ loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    list of 2**t int64 NumPy arrays of length ``N // 2**t``.

    Notes
    -----
    O(N^2) kernel evaluations (O(N^2 d) for the Stein kernel), O(N) memory.
    """
    K = K if n_threads is None else K.with_threads(n_threads)
    _check_kernel(K)
    idx = _index_array(indices, K.n, "indices")
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
        raise TypeError(f"t must be an integer, got {type(t).__name__}")
    t = int(t)
    if t < 0:
        raise ValueError(f"t must be >= 0, got {t}")
    if idx.size >> t < 1:
        raise ValueError(
            f"indices has {idx.size} entries, too few to halve t = {t} times (needs {1 << t})"
        )
    delta = _check_delta(delta)
    if uniforms is not None:
        uniforms = np.ascontiguousarray(uniforms, dtype=np.float64).ravel()
        seed = 0
    else:
        seed = int(_rng(rng).integers(2**63))
    out = _native.kt_split(K, idx, t, delta, seed, uniforms)
    return [np.array(row) for row in out]


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
    n_threads: int | None = None,
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
    passes : int
        Sweeps over the coreset (Alg. D.3 makes one; a sweep with no swap stops early).
    n_threads : int or None
        Threads of the C++ loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    (m,) int64 NumPy array of indices (with repeats).

    Notes
    -----
    O(L m^2 + passes m n) kernel evaluations for L candidates, O(n + L m) memory.
    """
    K = K if n_threads is None else K.with_threads(n_threads)
    _check_kernel(K)
    if isinstance(candidates, np.ndarray) and candidates.ndim == 2:
        cands = [candidates[i] for i in range(candidates.shape[0])]
    else:
        try:
            cands = list(candidates)
        except TypeError:
            raise TypeError("candidates must be a sequence of index arrays") from None
    if not cands:
        raise ValueError("candidates must hold at least one coreset")
    cands = [_index_array(c, K.n, "candidates") for c in cands]
    m = cands[0].size
    if m < 1 or any(c.size != m for c in cands):
        sizes = sorted({c.size for c in cands})
        raise ValueError(f"candidates must be non-empty and of one size, got sizes {sizes}")
    passes = _check_m(passes, "passes")
    C = np.stack(cands)
    short = [C[int(np.argmin(_mmd2(K, C)))].copy()]
    if baseline is not None:
        b = _index_array(baseline, K.n, "baseline")
        if b.size != m:
            raise ValueError(f"baseline must have the candidates' size {m}, got {b.size}")
        short.append(b.copy())
    for I in short:
        _native.kt_swap_refine(K, I, passes)
    final = _mmd2(K, np.stack(short))
    return short[int(np.argmin(final))]


def kernel_thinning(
    K: KernelMatrix,
    m: int,
    *,
    indices=None,
    delta: float = 0.5,
    rng=None,
    baseline=None,
    passes: int = 1,
    n_threads: int | None = None,
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
    baseline : (m,) int array, optional
        Extra candidate for KT-Swap (SKT passes the Stein thinning coreset).
    passes : int
        KT-Swap sweeps.
    n_threads : int or None
        Threads of the C++ loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    (m,) int64 NumPy array of indices into K's points (with repeats); the weight of point i is
    its number of occurrences over m.

    Notes
    -----
    O(n'^2 + n' m + n m) kernel evaluations, O(n + n') memory.
    """
    K = K if n_threads is None else K.with_threads(n_threads)
    _check_kernel(K)
    m = _check_m(m)
    if indices is None:
        idx = np.arange(K.n, dtype=np.int64)
    else:
        idx = _index_array(indices, K.n, "indices")
    ratio = idx.size / m
    t = int(round(math.log2(ratio))) if ratio >= 1 else -1
    if t < 0 or (m << t) != idx.size:
        raise ValueError(
            f"len(indices) / m must be a power of two, got len(indices) = {idx.size}, m = {m}"
        )
    cands = kt_split(K, idx, t, delta=delta, rng=rng) if t > 0 else [idx]
    return kt_swap(K, cands, baseline=baseline, passes=passes)

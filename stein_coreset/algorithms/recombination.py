"""Recombination (Alg. G.1), KT-Swap-LS (Alg. G.2) and Recombination Thinning (Alg. 4).

The serial parts (the Caratheodory reduction and the line-search swaps) are C++
(``src_cpp/recombination.*``, ``src_cpp/kt_swap_ls.*``); the weighted RPCholesky factor is built
on the array API in K's namespace, and only its (support x rank) slab crosses to the host.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from ..engine import KernelMatrix
from . import _native
from .resample import resample
from .rpcholesky import weighted_rpcholesky
from .weights import (
    SWAP_LS_FORMATS,
    check_thinning_input,
    input_weights,
    quadratic_form,
    simplex_weights,
    swap_ls_support,
)

__all__ = ["recombination", "kt_swap_ls", "recombination_thinning"]


def _host_vector(a, name, dtype=np.float64):
    """A 1-D host copy of a NumPy / array-API vector or a sequence (one explicit transfer)."""
    if isinstance(a, (list, tuple, range)):
        a = np.asarray(a)
    elif not isinstance(a, np.ndarray):
        a = aa.to_host(a, dtype)
    a = np.ascontiguousarray(a)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if dtype is np.int64:
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
        return a.astype(np.int64, copy=False)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    return a.astype(np.float64, copy=False)


def recombination(A, x0):
    """Sparse non-negative vector with the same image: Recombination (Alg. G.1).

    Returns ``x >= 0`` with ``A x = A x0`` and at most ``rank(A) <= m`` nonzeros (Tchernychova,
    2016, Alg. 1, in the paper's 2m-block form): the support is split into 2m blocks, each block
    is collapsed to the column ``A[:, I] x[I]``, the m x 2m problem is reduced exactly by
    Find-BFS, and the support halves per round.

    Parameters
    ----------
    A : (m, n) array
        Test functions evaluated at the points. The paper asks for one all-positive row (the
        constant function, which makes ``sum(x) = sum(x0)``); the implementation moves along
        whichever sign of a null vector has a positive entry, so it is valid without one.
    x0 : (n,) array
        Non-negative weights.

    Returns
    -------
    x : (n,) array in A's namespace, ``x >= 0``, at most m nonzeros (exact zeros elsewhere).

    Notes
    -----
    O(m n + m^3 log(n / m)) time on one core, O(m^2) extra memory besides a copy of A on the
    host. Rows are equilibrated and the null spaces come from a pivoted Householder QR, so the
    residual ``A x - A x0`` is at rounding level relative to ``|A| x0`` row by row.
    """
    xp, dev = aa.namespace(A=A, x0=x0)
    if A.ndim != 2:
        raise ValueError(f"A must be a 2-D array of shape (m, n), got shape {tuple(A.shape)}")
    n = int(A.shape[1])
    if x0.ndim != 1 or x0.shape[0] != n:
        raise ValueError(f"x0 must have shape ({n},) to match A's columns, got {tuple(x0.shape)}")
    # A Fortran-ordered NumPy A is A^T in C order: hand it over points-major, without a copy.
    points_major = (
        isinstance(A, np.ndarray)
        and A.dtype == np.float64
        and A.T.flags.c_contiguous
        and not A.flags.c_contiguous
    )
    Ah = A.T if points_major else aa.to_host(A)
    xh = aa.to_host(x0)
    if not np.all(np.isfinite(Ah)):
        raise ValueError("A has NaN or inf entries")
    if not np.all(np.isfinite(xh)):
        raise ValueError("x0 has NaN or inf entries")
    if np.any(xh < 0):
        raise ValueError("x0 must be non-negative")
    x = _native.recombination(Ah, xh, points_major)
    return aa.from_host(x, xp=xp, device=dev)


def kt_swap_ls(
    K: KernelMatrix,
    indices,
    weights,
    fmt: str = "splx",
    *,
    n_threads: int | None = None,
):
    """Greedy support swaps with exact line search: KT-Swap-LS (Alg. G.2).

    Visits the given support points in order; each is removed (the rest renormalised) and the
    single point ``k`` of all n with the best line-searched weight ``t`` is added back,
    ``w <- (1 - t) w + t e_k``. Putting the removed point back is one of the candidates, so
    ``MMD_{k_P}`` never increases and the support never grows.

    Parameters
    ----------
    K : KernelMatrix
        The n x n kernel matrix of k_P.
    indices : (s,) int sequence or array
        Distinct support indices into the n points (visited in this order).
    weights : (s,) array
        Their weights, summing to 1; non-negative for ``fmt="splx"``.
    fmt : {"splx", "cp"}
        "splx": the line search is clipped to t in [0, 1], so weights stay in the simplex.
        "cp": unconstrained t (constant-preserving weights, any sign, sum 1).
    n_threads : int or None
        Threads of the C++ loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    indices : (k,) int64 NumPy array of the new support (k <= s), increasing.
    weights : (k,) array in K's namespace, summing to 1.

    Notes
    -----
    O(n s) kernel evaluations and O(n s) arithmetic with the sufficient statistics
    g = K w and D = w^T K w (C++, on host copies of the points).
    """
    if n_threads is not None:  # validated first: a wrong K is a TypeError naming K
        K = val.check_kernel_matrix(K).with_threads(n_threads)
    val.check_kernel_matrix(K)
    if not isinstance(fmt, str) or fmt.lower() not in SWAP_LS_FORMATS:
        raise ValueError(f"fmt must be 'splx' or 'cp', got {fmt!r}")
    fmt = fmt.lower()
    code = SWAP_LS_FORMATS[fmt]
    idx = _host_vector(indices, "indices", np.int64)
    w = _host_vector(weights, "weights")
    if idx.shape != w.shape:
        raise ValueError(
            f"indices and weights must have the same length, got {idx.size} and {w.size}"
        )
    if idx.size == 0:
        raise ValueError("indices must not be empty")
    if idx.min() < 0 or idx.max() >= K.n:
        raise ValueError(f"indices must lie in [0, {K.n}), got range [{idx.min()}, {idx.max()}]")
    if np.unique(idx).size != idx.size:
        raise ValueError("indices must be distinct")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights has NaN or inf entries")
    if code == 0 and np.any(w < 0):
        raise ValueError("weights must be non-negative for fmt='splx'")
    if not math.isclose(float(w.sum()), 1.0, rel_tol=1e-6):
        raise ValueError(f"weights must sum to 1, got sum {w.sum():.6g}")
    idx, w = swap_ls_support(K, idx, w, fmt)
    return idx, aa.from_host(w, xp=K.xp, device=K.device)


def recombination_thinning(
    K: KernelMatrix,
    w,
    m: int,
    *,
    rank: int | None = None,
    rng=None,
    check_input: bool = True,
    n_threads: int | None = None,
):
    """Simplex-weighted coreset of at most m points: Recombination Thinning (RT, Alg. 4).

    Resample(w, n) prunes small weights; weighted RPCholesky gives ``rank`` test vectors F;
    Recombination on ``[F, 1]^T`` finds a sparse simplex vector matching ``F^T w``; KT-Swap-LS
    (simplex format) refines the support; a simplex QP reoptimises the weights on it.

    Parameters
    ----------
    K : KernelMatrix
        k_P on the n input points (Stein kernel, or a base kernel centred at the input).
    w : (n,) array
        Simplex weights of the input (e.g. from Stein thinning or low-rank debiasing), in K's
        namespace.
    m : int
        Output size bound, 1 <= m <= n.
    rank : int, optional
        Number of RPCholesky test vectors, 0 <= rank <= m - 1 (default m - 1).
    rng : numpy.random.Generator or seed, optional
    check_input : bool
        Validate the arguments (default); ``False`` trusts them (``rank`` given, ``rng`` a
        Generator, ``w`` None or validated simplex weights).
    n_threads : int or None
        Threads of the C++ loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    indices : (k,) int64 NumPy array, k <= m, distinct and increasing.
    weights : (k,) array in K's namespace, non-negative, summing to 1.

    Notes
    -----
    O((d + m) n m) for RPCholesky and KT-Swap-LS, O(m^3 log n) for Recombination and O(m^3)
    per active-set step of the final QP (Prop. G.1).
    """
    if n_threads is not None:  # validated first: a wrong K is a TypeError naming K
        K = val.check_kernel_matrix(K).with_threads(n_threads)
    if not check_input:
        return _recombination_thinning(K, w, m, m - 1 if rank is None else rank, rng)
    w, m, rank, rng = check_thinning_input(K, w, m, rank, rng, lambda m: (0, m - 1, "m - 1"))
    return _recombination_thinning(K, w, m, rank, rng)


def _recombination_thinning(K: KernelMatrix, w, m: int, rank: int, rng: np.random.Generator):
    """:func:`recombination_thinning` on validated arguments (``rank`` resolved)."""
    xp, n = K.xp, K.n
    w = input_weights(K, w)

    # Resample(w, n) (Alg. E.3): equal weights 1/n on a multiset; small weights are pruned.
    counts = np.bincount(resample(w, n, rng, check_input=False), minlength=n)
    supp_h = np.flatnonzero(counts)
    ws = counts[supp_h] / float(n)
    if supp_h.size <= rank + 1:
        # Recombination keeps at most rank([F, 1]) = min(support, rank + 1) points: with the
        # support that small it has nothing to remove, and its O(m^3 log n) pass is skipped
        idx, wr = supp_h, ws
    else:
        idx, wr = _recombine(K, supp_h, ws, rank, rng)

    idx, wr = swap_ls_support(K, idx, wr, "splx")
    KJ = aa.to_host(K.block(idx, idx))
    wq = simplex_weights(KJ, wr)
    if quadratic_form(KJ, wq) > quadratic_form(KJ, wr):
        wq = wr
    keep = wq > 0
    idx, wq = idx[keep], wq[keep] / wq[keep].sum()
    return idx, aa.from_host(wq, xp=xp, device=K.device)


def _recombine(K: KernelMatrix, supp_h: np.ndarray, ws: np.ndarray, rank: int, rng):
    """Weighted RPCholesky test vectors on the support, then Recombination (Alg. G.1) of the
    support weights ``ws``: at most ``rank + 1`` points with the same ``[F, 1]^T`` moments."""
    xp = K.xp
    if rank > 0:
        # factored on the support only: off it the reweighted matrix is zero, so the pivot
        # draws and the factor's rows on the support are the same as over all n points
        w1 = aa.from_host(ws, xp=xp, device=K.device)
        _, F = weighted_rpcholesky(K.take(supp_h), w1, rank, rng)
    else:
        F = np.zeros((supp_h.size, 0))
    # [F, 1]^T stored points-major: row j holds (F_j, 1), so no transpose is formed; written
    # straight from F (a host view of the factor: no contiguous copy), which is freed before
    # Recombination runs, so the (s, r) arrays alive at once are two, not three
    P = np.empty((F.shape[0], F.shape[1] + 1))
    P[:, :-1] = F if isinstance(F, np.ndarray) else aa.to_host(F)
    P[:, -1] = 1.0
    del F
    x = _native.recombination(P, ws, True)
    keep = x > 0
    return supp_h[keep], x[keep] / x[keep].sum()

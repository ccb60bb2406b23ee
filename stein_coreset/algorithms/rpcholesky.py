"""Weighted randomly pivoted Cholesky (Alg. F.1; Chen et al., 2022, Alg. 2.1 with weights)."""

from __future__ import annotations

import math

import array_api_compat
import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from ..engine import KernelMatrix
from . import _native

__all__ = ["weighted_rpcholesky", "weighted_rpcholesky_rows"]


def weighted_rpcholesky(K: KernelMatrix, w=None, rank: int = 1, rng=None, *, progress=False):
    """Low-rank factor of a kernel matrix by weighted randomly pivoted Cholesky (Alg. F.1).

    Runs RPCholesky on the reweighted matrix ``K'_{ij} = sqrt(w_i) K_ij sqrt(w_j)``, with the
    ``d <- max(d, 0)`` stability fix, then undoes the weighting, so that ``K ~ F F^T`` where it
    matters for w (entries with ``w_i = 0`` get zero rows).

    Parameters
    ----------
    K : KernelMatrix
        The n x n kernel matrix (only r of its columns are evaluated).
    w : (n,) array, optional
        Simplex weights (default uniform), in K's namespace.
    rank : int
        Number of pivots r.
    rng : numpy.random.Generator, optional
        Source of the pivot draws.

    Returns
    -------
    pivots : (r',) int64 NumPy array of distinct pivot indices, r' <= r (fewer only when the
        residual vanishes: K' is then reproduced exactly).
    F : (n, r') array in K's namespace with ``K ~ F F^T``.

    Notes
    -----
    O(n r) kernel evaluations, O(n r^2) arithmetic, O(n r) memory; never forms K. NumPy inputs run
    the loop in C++ (``src_cpp/rpcholesky.cpp``: the pivot columns from the kernel's cached
    structure-of-arrays layout, the update on the thread team); CuPy arrays run it as one persistent
    CUDA kernel (two grid barriers a step; with ``STEIN_CORESET_CUDA_LOOP=graph``, or a rank above
    4096, the array-API loop); other namespaces draw the pivots on the device (a cumulative sum and
    a search). No length-n array crosses to the host. Both draw the same pivots from the same
    generator and follow the same order of operations for each step i of Alg. F.1 (Chen et al.,
    2022, Alg. 2.1 on the reweighted matrix): the pivot s is the first index with
    ``cumsum(d)_s > u_i sum(d)`` (the C++ and CUDA loops sum d chunk by chunk, the chunks' sums
    kept by the steps that update d, so a step's serial part reads no length-n array); its
    residual ``g_s = K'_ss - sum_{k<i} F_sk^2`` is summed on
    its own, sequentially; the column ``g = K'_{:s} - F_{:, <i} F_{s, <i}^T`` is scaled by the
    reciprocal ``1 / sqrt(g_s)``; and ``d <- max(d - F_{:i}^2, 0)`` with ``d_s = 0``. The
    factors then agree to rounding (the kernel entries and the column update are summed in
    different orders, ~1e-15 relative) and the pivots are identical unless a draw falls within
    that rounding of a boundary of ``cumsum(d)``.
    """
    if w is not None:  # NaN weights drew no pivot and returned [] (issue 47)
        xp = K.xp
        bad = int(xp.sum(xp.astype(~xp.isfinite(w), xp.int64)))
        if bad:
            raise ValueError(f"w (the weights) has NaN or inf in {bad} of its {w.shape[0]} "
                             "entries")
    piv, G = weighted_rpcholesky_rows(K, w, rank, rng, progress=progress)
    return piv, K.xp.permute_dims(G, (1, 0))


def weighted_rpcholesky_rows(K: KernelMatrix, w=None, rank: int = 1, rng=None, *,
                             spare_rows: int = 0, progress=False):
    """:func:`weighted_rpcholesky` (Alg. F.1) with the factor as the rows of F^T.

    Returns ``(pivots, G)``: the same pivots, and G a C-ordered ``(r' + spare_rows, n)`` array
    in K's namespace whose first r' rows are F^T (the same values) and whose last
    ``spare_rows`` rows are zero: room for test functions that a caller appends to the
    factor's rows (Recombination's constant, Alg. G.1) without a second (n, r') array.
    O(n (r + spare_rows)) memory.
    """
    xp, dev, n = K.xp, K.device, K.n
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    rank = int(rank)
    if rank < 1:
        raise ValueError(f"rank must be >= 1, got {rank}")
    rank = min(rank, n)
    rows = rank + int(spare_rows)
    val.check_buffer(8.0 * n * rows, "rank",
                     f"the ({n}, {rows}) float64 factor of weighted RPCholesky", like=K.U)
    w = xp.full((n,), 1.0 / n, dtype=xp.float64, device=dev) if w is None else w
    # one draw per requested pivot, up front: both paths consume the generator alike
    u = rng.random(rank)
    factor = _factor_native if _native.has_rpcholesky_loop(K, rank) else _factor_array_api
    piv, Ft, scale, sw = factor(K, w, rank, rows, u, progress)
    if math.isnan(scale):
        raise FloatingPointError("weighted_rpcholesky: the kernel diagonal has NaN entries")
    r = int(piv.shape[0])
    fx = array_api_compat.array_namespace(Ft)
    inv_sw = fx.where(sw > 0.0, 1.0 / fx.where(sw > 0.0, sw, 1.0), 0.0)
    # in place: a second (n, r) array here was a third of the peak memory of rt/sr/lskt
    F = Ft[:r, ...]
    F *= inv_sw[None, :]
    G = Ft[:r + int(spare_rows), ...]
    return piv, aa.from_host(G, xp=xp, device=dev) if fx is not xp else G


def _factor_native(K: KernelMatrix, w, rank: int, rows: int, u: np.ndarray, progress: bool):
    """The compiled loop of K's backend: C++ (src_cpp/rpcholesky.cpp) on the cached SoA layout
    of K, or the persistent CUDA kernel on the device arrays. F is built as the rows of F^T
    (each pivot writes one contiguous row) of a zeroed (rows, n) array, returned whole."""
    xp, dev, n = K.xp, K.device, K.n
    if aa.is_numpy(xp):
        wh = np.asarray(aa.to_host(w), dtype=np.float64)
        sw = np.sqrt(np.clip(wh, 0.0, None))
        d = np.asarray(aa.to_host(K.diag()), dtype=np.float64) * wh
    else:
        wh = xp.astype(w, xp.float64)
        sw = xp.sqrt(xp.clip(wh, 0.0, None))
        d = K.diag() * wh
    d = xp.where(d > 0.0, d, 0.0)
    scale = float(xp.sum(d))
    Ft = xp.zeros((rows, n), dtype=xp.float64, device=dev)
    piv = xp.zeros((rank,), dtype=xp.int64, device=dev)
    chunk = max(1, math.ceil(rank / 25)) if progress else rank
    starts = range(0, rank, chunk)
    if progress:
        from .._progress import progress_bar

        starts = progress_bar(starts, desc="weighted RPCholesky", total=len(starts))
    r = rank
    for i0 in starts:
        i1 = min(rank, i0 + chunk)
        r = _native.weighted_rpcholesky(K, sw, d, Ft[:rank, ...], piv, i0, i1, u[i0:i1],
                                        1e-14 * scale)
        if r < i1:
            break
    return aa.to_host(piv[:r], np.int64), Ft, scale, sw


def _factor_array_api(K: KernelMatrix, w, rank: int, rows: int, u: np.ndarray, progress: bool):
    """The namespace-generic loop (any array-API namespace and device), step by step the
    operations of ``src_cpp/rpcholesky.cpp``; F^T in the first rows of a zeroed (rows, n)
    array, returned whole."""
    xp, dev, n = K.xp, K.device, K.n
    sw = xp.sqrt(xp.clip(w, 0.0, None))
    d = K.diag() * w
    d = xp.where(d > 0.0, d, 0.0)
    scale = float(xp.sum(d))
    # F^T, (rank, n) C-ordered: the first i columns of F are the contiguous rows Ft[:i], so the
    # product below reads them in place (F[:, :i] of an (n, rank) array is a strided view that
    # CuPy copies at every step, an (n, i) temporary per pivot)
    Ft = xp.zeros((rows, n), dtype=xp.float64, device=dev)
    ar = xp.arange(n, dtype=xp.int64, device=dev)
    pivots = []
    it = range(rank)
    if progress:
        from .._progress import progress_bar

        it = progress_bar(it, desc="weighted RPCholesky", total=rank)
    for i in it:
        cum = xp.cumulative_sum(d)
        total = cum[-1]
        if not float(total) > 1e-14 * scale:
            break
        s = xp.searchsorted(cum, xp.reshape(total * float(u[i]), (1,)), side="right")
        s = xp.clip(s, 0, n - 1)
        col = K.column(int(s[0]))
        col = col * sw * xp.take(sw, s)
        # the order of operations of src_cpp/rpcholesky.cpp: the pivot's residual
        # gs = K'_ss - sum_k F_sk^2 as a sequential sum (which is also the C++ column's entry
        # s), the column scaled by the reciprocal 1 / sqrt(gs)
        if i:
            fs = xp.reshape(xp.take(Ft[:i, ...], s, axis=1), (i,))
            gs = xp.cumulative_sum(xp.concat([xp.take(col, s), -(fs * fs)]))[-1]
            g = xp.where(ar == s, gs, col - xp.matmul(fs, Ft[:i, ...]))
        else:
            g = col
            gs = xp.take(col, s)[0]
        if not float(gs) > 0.0:
            break
        f = g * (1.0 / xp.sqrt(gs))
        Ft[i, ...] = f
        d = d - f * f
        # max(d, 0) fix; the pivot's own residual is exactly zero (rounding could leave a
        # 1e-17 there and let the pivot be drawn again)
        d = xp.where((d > 0.0) & (ar != s), d, 0.0)
        pivots.append(s)
    r = len(pivots)
    piv = aa.to_host(xp.concat(pivots), np.int64) if r else np.zeros(0, dtype=np.int64)
    return piv, Ft, scale, sw

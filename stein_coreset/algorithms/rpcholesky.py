"""Weighted randomly pivoted Cholesky (Alg. F.1; Chen et al., 2022, Alg. 2.1 with weights)."""

from __future__ import annotations

import math

import array_api_compat
import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from ..engine import KernelMatrix

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
        Number of pivots r (capped at n).
    rng : numpy.random.Generator or int, optional
        Source of the pivot draws.
    progress : bool
        Show a progress bar over the pivots.

    Returns
    -------
    pivots : (r',) int64 NumPy array of distinct pivot indices, r' <= r (fewer only when the
        residual vanishes: K' is then reproduced exactly).
    F : (n, r') array in K's namespace with ``K ~ F F^T``.

    Notes
    -----
    O(n r) kernel evaluations, O(n r^2) arithmetic, O(n r) memory; never forms K. Runs on
    the kernel matrix's engine backend (docs/engine.md); every backend draws the same pivots,
    and the factors agree to rounding.

    See Also
    --------
    low_rank_debias : Alg. 2, which runs AMD on this factor.
    cholesky_thinning : Alg. 6, which picks its support with these pivots.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import weighted_rpcholesky
    >>> X = np.random.default_rng(0).standard_normal((200, 2))
    >>> K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X)
    >>> pivots, F = weighted_rpcholesky(K, rank=10, rng=0)
    >>> pivots.shape, F.shape
    ((10,), (200, 10))
    >>> bool(np.allclose((F @ F.T)[np.ix_(pivots, pivots)], K.block(pivots, pivots)))
    True
    """
    if w is not None:  # NaN weights drew no pivot and returned []
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
    piv, Ft, scale, sw = K.weighted_rpcholesky(w, rank, rows, u, progress)
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

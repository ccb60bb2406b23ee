"""KT-Swap-LS (Alg. G.2): greedy support swaps with exact line search.

:func:`kt_swap_ls` checks its arguments and calls :func:`swap_ls_support`, which the weighted
pipelines (Cholesky thinning, recombination thinning) call directly on trusted host arrays.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from ..engine import KernelMatrix, check_kernel_matrix, with_threads

__all__ = ["kt_swap_ls", "swap_ls_support", "SWAP_LS_FORMATS"]

#: Line-search domains: "splx" clips t to [0, 1] (simplex weights), "cp" leaves it free.
SWAP_LS_FORMATS = {"splx": 0, "cp": 1}


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
        Threads of the compiled loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    indices : (k,) int64 NumPy array of the new support (k <= s), increasing.
    weights : (k,) array in K's namespace, summing to 1.

    Notes
    -----
    O(n s) kernel evaluations and O(n s) arithmetic with the sufficient statistics
    g = K w and D = w^T K w. Runs on the kernel matrix's engine backend (docs/engine.md).

    See Also
    --------
    kt_swap : the equal-weight swaps of Kernel Thinning (Alg. D.3).
    recombination_thinning : Alg. 4, which refines its support with this.
    cholesky_thinning : Alg. 6, the same with ``fmt="cp"``.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import kt_swap_ls
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> idx = np.arange(0, 256, 16)                        # every 16th point, equal weights
    >>> w = np.full(16, 1 / 16)
    >>> new, w2 = kt_swap_ls(kern.bind(X, -X), idx, w)
    >>> new.size, round(float(w2.sum()), 4)
    (16, 1.0)
    >>> before = sc.ksd(X[idx], -X[idx], kernel=kern)
    >>> after = sc.ksd(X[new], -X[new], weights=w2, kernel=kern)
    >>> round(before, 4), round(after, 4)
    (0.7487, 0.2233)
    """
    K = with_threads(K, n_threads)
    check_kernel_matrix(K)
    if not isinstance(fmt, str) or fmt.lower() not in SWAP_LS_FORMATS:
        raise ValueError(f"fmt must be 'splx' or 'cp', got {fmt!r}")
    fmt = fmt.lower()
    code = SWAP_LS_FORMATS[fmt]
    idx = val.host_vector(indices, "indices", np.int64)
    w = val.host_vector(weights, "weights")
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


def swap_ls_support(K: KernelMatrix, idx: np.ndarray, w: np.ndarray, fmt: str):
    """KT-Swap-LS (Alg. G.2) of the host support ``idx`` with host weights ``w``.

    Returns the new support (increasing int64) and its host weights. O(n |idx|) evaluations.
    """
    dense = np.zeros(K.n)
    dense[idx] = w
    K.kt_swap_ls(dense, idx, SWAP_LS_FORMATS[fmt])
    out = np.flatnonzero(dense)
    return out.astype(np.int64), dense[out]

"""Cholesky Thinning (CT, Alg. 6): constant-preserving coresets."""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from ..engine import KernelMatrix, with_threads
from .rpcholesky import weighted_rpcholesky
from .swap_ls import swap_ls_support
from .weights import (
    affine_weights,
    check_thinning_input,
    input_weights,
    quadratic_form,
)

__all__ = ["cholesky_thinning"]


def _shifted(K: KernelMatrix, c: float) -> KernelMatrix:
    """The kernel matrix of k_P + c on the same points (the regularised kernel of Alg. 6).

    A KernelMatrix adds ``mean_all - mean_i - mean_j`` to its entries, so a zero centring
    vector with constant ``mean_all + c`` shifts every entry by c.
    """
    xp = K.xp
    mean = K.mean if K.mean is not None else xp.zeros((K.n,), dtype=xp.float64, device=K.device)
    return KernelMatrix(
        K.base, K.U, K.T, mean, K.mean_all + float(c), K.backend, K.n_threads
    )


def cholesky_thinning(
    K: KernelMatrix,
    w,
    m: int,
    *,
    rank: int | None = None,
    rng=None,
    check_input: bool = True,
    n_threads: int | None = None,
):
    """Constant-preserving coreset of at most m points: Cholesky Thinning (CT, Alg. 6).

    Weighted RPCholesky on the regularised kernel ``k_P + c`` (c = mean of the m largest
    diagonal entries of k_P) picks the support; the optimal constant-preserving weights
    ``K_I^{-1} 1 / (1^T K_I^{-1} 1)`` (Eq. 64) are set on it; KT-Swap-LS (constant-preserving
    format) refines the support; the optimal weights are recomputed on the final support.

    Parameters
    ----------
    K : KernelMatrix
        k_P on the n input points (Stein kernel, or a base kernel centred at the input).
    w : (n,) array
        Simplex weights of the input, in K's namespace (``None``: uniform).
    m : int
        Output size bound, 1 <= m <= n.
    rank : int, optional
        Number of RPCholesky pivots, 1 <= rank <= m (default m).
    rng : numpy.random.Generator or seed, optional
        Source of the pivot draws.
    check_input : bool
        Validate the arguments (default); ``False`` trusts them.
    n_threads : int or None
        Threads of the compiled loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    indices : (k,) int64 NumPy array, k <= m, distinct and increasing.
    weights : (k,) array in K's namespace summing to 1 (any sign).

    Notes
    -----
    O((d + m) n m) for RPCholesky and KT-Swap-LS, O(m^3) for the two reweightings
    (Prop. H.1). The weights are solved by a diagonally scaled bordered KKT system (SVD), so an
    ill-conditioned K_I does not blow them up.

    See Also
    --------
    recombination_thinning : Alg. 4, simplex weights instead.
    weighted_compression : Stein Cholesky (Alg. 7), debiasing then this.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import cholesky_thinning, stein_thinning_weights
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> K = kern.bind(X, -X)
    >>> idx, w = cholesky_thinning(K, stein_thinning_weights(K), 16, rng=0)
    >>> idx.size, round(float(w.sum()), 4), round(float(K.take(idx).quad(w)) ** 0.5, 4)
    (16, 1.0, 0.1875)
    """
    K = with_threads(K, n_threads)
    if not check_input:
        return _cholesky_thinning(K, w, m, m if rank is None else rank, rng)
    w, m, rank, rng = check_thinning_input(K, w, m, rank, rng, lambda m: (1, m, "m"))
    return _cholesky_thinning(K, w, m, rank, rng)


def _cholesky_thinning(K: KernelMatrix, w, m: int, rank: int, rng: np.random.Generator):
    """:func:`cholesky_thinning` on validated arguments (``rank`` resolved)."""
    xp, n = K.xp, K.n
    w = input_weights(K, w)

    top = xp.sort(K.diag())[n - m :]
    c = float(xp.mean(top))
    # factored on the support of w only (the same pivot draws; zero rows elsewhere)
    supp = np.flatnonzero(aa.to_host(w) > 0.0)
    Kc = _shifted(K, c)
    if supp.size < n:
        sd = aa.as_index_array(xp, supp, K.device)
        piv, _ = weighted_rpcholesky(Kc.take(sd), xp.take(w, sd), rank, rng)
        piv = supp[piv]
    else:
        piv, _ = weighted_rpcholesky(Kc, w, rank, rng)
    if piv.size == 0:
        # K + c vanishes on the support (e.g. all points equal under a centred kernel): then
        # K = 0 there and every coreset has MMD 0; keep the heaviest point
        j = int(xp.argmax(w))
        return np.array([j], dtype=np.int64), xp.ones((1,), dtype=xp.float64, device=K.device)
    idx = np.sort(piv)
    w1 = affine_weights(aa.to_host(K.block(idx, idx)))

    idx, w2 = swap_ls_support(K, idx, w1, "cp")
    KI = aa.to_host(K.block(idx, idx))
    w3 = affine_weights(KI)
    if not quadratic_form(KI, w3) <= quadratic_form(KI, w2):
        w3 = w2
    keep = w3 != 0
    idx, w3 = idx[keep], w3[keep] / w3[keep].sum()
    return idx, aa.from_host(w3, xp=xp, device=K.device)

"""Recombination (Alg. G.1) and Recombination Thinning (Alg. 4), which calls KT-Swap-LS
(Alg. G.2, :mod:`.swap_ls`) on its result.

The weighted RPCholesky factor is built in K's namespace, and only its (support x rank) slab
crosses to the host for the reduction (docs/engine.md).
"""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from .._threads import effective_n_threads
from ..engine import KernelMatrix, get_backend, runner, with_threads
from .resample import resample
from .rpcholesky import weighted_rpcholesky_rows
from .swap_ls import swap_ls_support
from .weights import (
    check_thinning_input,
    input_weights,
    quadratic_form,
    simplex_weights,
)

__all__ = ["recombination", "recombination_thinning"]


def recombination(A, x0, *, n_threads: int | None = None):
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
    n_threads : int or None
        Threads of the compiled reduction (None: the usable cores); the result does not depend
        on it.

    Returns
    -------
    x : (n,) array in A's namespace, ``x >= 0``, at most m nonzeros (exact zeros elsewhere).

    Notes
    -----
    O(m n + m^3 log(n / m)) time, O(m^2) extra memory besides a copy of A on the host. Rows
    are equilibrated and the null spaces come from a pivoted Householder QR, so the residual
    ``A x - A x0`` is at rounding level relative to ``|A| x0`` row by row.

    The result is a deterministic function of the bits of ``(A, x0)``, whatever their namespace
    (the reduction always runs on one host copy). It is not a continuous function of them: each
    Find-BFS step drops the column with the smallest ratio ``x_j / phi_j`` along a null vector
    ``phi``, so when two ratios nearly tie, a perturbation at rounding level (1e-15) can keep
    another set of points. Both sets are exact answers (same image, at most rank(A) points).

    See Also
    --------
    recombination_thinning : Alg. 4, Recombination on weighted RPCholesky test vectors.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.algorithms import recombination
    >>> A = np.vstack([np.ones(50), np.random.default_rng(0).random((3, 50))])  # 1 and 3 tests
    >>> x0 = np.full(50, 1 / 50)
    >>> x = recombination(A, x0)
    >>> int((x > 0).sum()), bool(np.allclose(A @ x, A @ x0))    # 4 points, the same image
    (4, True)
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
    x = runner(get_backend("auto", np), "recombination").recombination(
        Ah, xh, points_major, effective_n_threads(n_threads))
    return aa.from_host(x, xp=xp, device=dev)


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
        Source of the resampling and pivot draws.
    check_input : bool
        Validate the arguments (default); ``False`` trusts them (``rank`` given, ``rng`` a
        Generator, ``w`` None or validated simplex weights).
    n_threads : int or None
        Threads of the compiled loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    indices : (k,) int64 NumPy array, k <= m, distinct and increasing.
    weights : (k,) array in K's namespace, non-negative, summing to 1.

    Notes
    -----
    O((d + m) n m) for RPCholesky and KT-Swap-LS, O(m^3 log n) for Recombination and O(m^3)
    per active-set step of the final QP (Prop. G.1).

    Backends agree only in distribution: their test vectors F agree to rounding, but
    Recombination is discontinuous in F (see :func:`recombination`), so on some inputs they keep
    different, equally valid points, of the same quality (KSD).

    See Also
    --------
    cholesky_thinning : Alg. 6, constant-preserving weights instead of simplex ones.
    weighted_compression : Stein Recombination (Alg. 5), debiasing then this.
    stein_thinning_weights : input weights that debias the sample.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import recombination_thinning, stein_thinning_weights
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> K = kern.bind(X, -X)
    >>> idx, w = recombination_thinning(K, stein_thinning_weights(K), 16, rng=0)
    >>> idx.size, round(float(w.sum()), 4), round(sc.ksd(X[idx], -X[idx], w, kern), 4)
    (16, 1.0, 0.1864)
    """
    K = with_threads(K, n_threads)
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
    if rank > 0:
        # factored on the support only: off it the reweighted matrix is zero, so the pivot
        # draws and the factor's rows on the support are the same as over all n points.
        # [F, 1]^T is the factor's rows F^T and one spare row set to 1: no (s, r) copy
        w1 = aa.from_host(ws, xp=K.xp, device=K.device)
        _, G = weighted_rpcholesky_rows(K.take(supp_h), w1, rank, rng, spare_rows=1)
        G = aa.to_host(G)
        G[-1, ...] = 1.0
    else:
        G = np.ones((1, supp_h.size))
    x = K.runner("recombination").recombination(G, ws, False, K.n_threads)
    keep = x > 0
    return supp_h[keep], x[keep] / x[keep].sum()

"""Weight helpers shared by the weighted methods (RT, CT, SR, SC, LSR, LSC): equal weights of an
index multiset, the input weights and their centring, and the small
dense quadratic programs solved on a coreset's support (O(|J|^3)).

Internal building blocks: arguments are trusted (the public functions of
:mod:`stein_coreset.algorithms` validate theirs before calling these).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from .. import _array_api as aa
from .. import _validation as val
from ..engine import KernelMatrix, check_kernel_matrix, get_backend, runner

__all__ = [
    "equal_weights",
    "weighted_ksd",
    "stage_ksd",
    "picks_ksd",
    "STAGE_KSD_MAX_SUPPORT",
    "input_weights",
    "check_thinning_input",
    "centre_at_weights",
    "affine_weights",
    "affine_weights_reference",
    "simplex_weights",
    "simplex_weights_reference",
    "quadratic_form",
]

#: Weight formats of KT-Swap-LS (Alg. G.2): simplex ("splx") or constant-preserving ("cp").


def equal_weights(idx, m: int):
    """A multiset of m indices as distinct increasing indices with weights (count / m).

    Returns ``(indices, weights)``: int64 and float64 host arrays. O(m log m).
    """
    uniq, counts = np.unique(np.asarray(idx, dtype=np.int64), return_counts=True)
    return uniq, counts / float(m)


def weighted_ksd(K: KernelMatrix, idx, w) -> float:
    """MMD_{k_P} of ``sum_i w_i delta_{x_idx_i}`` to P (host indices, host weights):
    O(len(idx)^2) kernel evaluations on the support only."""
    sub = K.take(np.asarray(idx, dtype=np.int64))
    return math.sqrt(max(sub.quad(aa.from_host(np.asarray(w, dtype=np.float64), like=sub.U)),
                         0.0))


#: Largest support whose KSD a result's ``info["stages"]`` reports for an intermediate stage
#: (Stein thinning's picks, the debiasing weights): O(support^2 / 2) evaluations, at most
#: ~3e7 (tens of milliseconds); above it the stage's KSD is None (measured at n = 2^15:
#: Stein thinning's 46,336 picks of skt cost 11% of its time).
STAGE_KSD_MAX_SUPPORT = 2**13


def stage_ksd(K: KernelMatrix, idx, w) -> float | None:
    """:func:`weighted_ksd` of an intermediate stage, or None above
    :data:`STAGE_KSD_MAX_SUPPORT` support points."""
    return weighted_ksd(K, idx, w) if len(idx) <= STAGE_KSD_MAX_SUPPORT else None


def picks_ksd(K: KernelMatrix, picks) -> float | None:
    """:func:`stage_ksd` of the equal-weighted multiset ``picks`` (host indices, repeats
    counted): O(u^2) kernel evaluations for u distinct picks."""
    picks = np.asarray(picks, dtype=np.int64)
    return stage_ksd(K, *equal_weights(picks, picks.size))


def check_thinning_input(K: KernelMatrix, w, m: int, rank, rng, rank_range):
    """Validated ``(w, m, rank, rng)`` of a weighted thinning (RT, CT): ``m`` in [1, n], ``rank``
    (None: ``hi``) in ``rank_range(m) = (lo, hi, name of hi)``, simplex ``w`` or None."""
    check_kernel_matrix(K)
    m = val.check_size(m, K.n, "m")
    lo, hi, hi_name = rank_range(m)
    rank = hi if rank is None else val.check_int(rank, "rank")
    if not lo <= rank <= hi:
        raise ValueError(f"rank must be between {lo} and {hi_name} = {hi}, got {rank}")
    rng = val.check_random_state(rng, "rng")
    if w is not None:
        aa.namespace(K=K.U, w=w)
        w = val.check_weights(w, K.n, K.xp, "w", simplex=True, device=K.device)
    return w, m, rank, rng


def input_weights(K: KernelMatrix, w):
    """Simplex input weights in K's namespace, renormalised to sum 1 (uniform when None).

    ``w`` must already be validated (finite, non-negative, length n, K's namespace). O(n).
    """
    xp = K.xp
    if w is None:
        return xp.full((K.n,), 1.0 / K.n, dtype=xp.float64, device=K.device)
    return w / xp.sum(w)


def centre_at_weights(K: KernelMatrix, w) -> KernelMatrix:
    """A base kernel matrix centred at the weighted input ``sum_j w_j delta_{x_j}``.

    ``K`` is a base kernel centred at the input (its centring is replaced); with ``w = None``
    it is returned as is. Then MMD_{k_P}(Q, P) is the MMD of Q to the weighted input (the
    RT / CT baselines with input weights). O(n^2) evaluations for the centring vector.
    """
    if w is None:
        return K
    plain = KernelMatrix(K.base, K.U, backend=K.backend, n_threads=K.n_threads)
    mean = plain.matvec(w)
    return KernelMatrix(
        K.base,
        K.U,
        None,
        mean,
        float(K.xp.sum(w * mean)),
        backend=K.backend,
        n_threads=K.n_threads,
    )


def _host_qp():
    """The backend that runs the weights' QP and Cholesky steps on a host (p, p) block."""
    return runner(get_backend("auto", np), "simplex_weights")


def affine_weights(KJ: np.ndarray) -> np.ndarray:
    """argmin_{1^T w = 1} w^T KJ w, i.e. KJ^{-1} 1 / (1^T KJ^{-1} 1) (Eq. 64), solved stably.

    The Cholesky path runs in C++ (engine/cpu/src_cpp/simplex_qp.cpp: serial, no BLAS threads);
    where it declines (an ill-conditioned or indefinite KJ) :func:`affine_weights_reference`
    answers.
    """
    w = _host_qp().affine_weights(KJ) if KJ.shape[0] > 1 else None
    return affine_weights_reference(KJ) if w is None else w


def affine_weights_reference(KJ: np.ndarray) -> np.ndarray:
    """:func:`affine_weights` in NumPy/SciPy, the eigendecomposition fallback included.

    Symmetric diagonal scaling to a unit diagonal (w = y / d, constraint c^T y = 1 with
    c = 1 / d). A Cholesky solve y ~ Ks^{-1} c when its pivots show Ks well conditioned
    (min/max squared pivot > 1e-10); otherwise an eigendecomposition Ks = Q diag(lam) Q^T:
    with b = Q^T c the minimiser
    is z = (b / lam) / sum(b^2 / lam) in eigen-coordinates. Eigenvalues below p * eps * lam_max
    count as zero; when c has a component there the minimum is 0 and is reached inside that
    numerical null space. O(|J|^3).
    """
    p = KJ.shape[0]
    if p == 1:
        return np.ones(1)
    dg = np.diag(KJ).copy()
    d = np.sqrt(np.where(dg > 0, dg, 1.0))
    Ks = KJ / d[:, None] / d[None, :]
    Ks = 0.5 * (Ks + Ks.T)
    c = 1.0 / d
    # Well-conditioned Ks (the usual case): Cholesky, ~10x cheaper than the eigendecomposition.
    try:
        L = np.linalg.cholesky(Ks)
    except np.linalg.LinAlgError:
        L = None
    if L is not None:
        dl = np.diag(L)
        if float(dl.min()) ** 2 > 1e-10 * float(dl.max()) ** 2:
            y = scipy.linalg.cho_solve((L, True), c)
            w = y / d
            s = w.sum()
            if s > 0 and np.all(np.isfinite(w)):
                return w / s
    lam, Q = np.linalg.eigh(Ks)
    b = Q.T @ c
    tiny = lam <= p * np.finfo(float).eps * max(float(lam[-1]), 0.0)
    bn = b[tiny]
    if bn.size and float(bn @ bn) > 1e-12 * float(b @ b):
        z = np.zeros(p)
        z[tiny] = bn / float(bn @ bn)
    else:
        z = np.where(tiny, 0.0, b / np.where(tiny, 1.0, lam))
    y = Q @ z
    w = y / d
    s = w.sum()
    return w / s if s != 0 and np.isfinite(s) else np.full(p, 1.0 / p)


def quadratic_form(KJ: np.ndarray, w: np.ndarray) -> float:
    """w^T KJ w on the host (the squared MMD of a weighted support)."""
    return float(w @ KJ @ w)


def simplex_weights(KJ: np.ndarray, w0: np.ndarray, max_iter: int | None = None) -> np.ndarray:
    """argmin over the simplex of w^T KJ w by a primal active-set method, from feasible w0.

    Each iteration solves the affine problem on the free set (``affine_weights``) and either
    moves to it, stops at the first blocking constraint, or frees the most negative multiplier.
    The objective never increases. The loop runs in C++ (engine/cpu/src_cpp/simplex_qp.cpp: the free
    set's Cholesky factor updated as points enter and leave, O(|J|^2) per iteration, serial, no
    BLAS threads); a free set whose factor is ill conditioned sends the whole problem to
    :func:`simplex_weights_reference`, whose affine steps fall back to an eigendecomposition.
    """
    max_iter = max_iter or 20 * KJ.shape[0] + 20
    w, _ = _host_qp().simplex_qp(KJ, w0, max_iter)
    return simplex_weights_reference(KJ, w0, max_iter) if w is None else w


def simplex_weights_reference(
    KJ: np.ndarray, w0: np.ndarray, max_iter: int | None = None
) -> np.ndarray:
    """:func:`simplex_weights` in NumPy, one ``affine_weights`` solve per iteration (O(|J|^3)
    each, on BLAS's threads): the fallback for ill-conditioned free sets, and the reference
    the C++ loop is tested against."""
    p = KJ.shape[0]
    w = np.clip(w0, 0.0, None)
    w = w / w.sum()
    best, fbest = w.copy(), quadratic_form(KJ, w)
    free = w > 0
    scale = max(float(np.max(np.abs(np.diag(KJ)))), 1e-300)
    for _ in range(max_iter or 20 * p + 20):
        P = np.flatnonzero(free)
        z = np.zeros(p)
        z[P] = affine_weights_reference(KJ[np.ix_(P, P)])
        if np.all(z[P] >= 0):
            w = z
            grad = 2.0 * (KJ @ w)
            lam = float(w @ grad)
            nu = grad - lam
            nu[P] = 0.0
            j = int(np.argmin(nu))
            if nu[j] >= -1e-12 * scale:
                f = quadratic_form(KJ, w)
                if f <= fbest:
                    best, fbest = w.copy(), f
                break
            free[j] = True
        else:
            neg = P[z[P] < 0]
            ratio = w[neg] / (w[neg] - z[neg])
            alpha = float(ratio.min())
            w = w + alpha * (z - w)
            w[neg[ratio <= alpha]] = 0.0
            w = np.clip(w, 0.0, None)
            w = w / w.sum()
            free = w > 0
        f = quadratic_form(KJ, w)
        if f <= fbest:
            best, fbest = w.copy(), f
    return best

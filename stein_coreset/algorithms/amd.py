"""Accelerated entropic mirror descent on the simplex (Alg. F.2; Wang et al., 2023, Alg. 14)."""

from __future__ import annotations

import math

import array_api_compat

from .. import _array_api as aa
from .. import _validation as val
from .._threads import effective_n_threads
from ..engine import check_backend, get_backend, runner

__all__ = ["amd", "LowRankPlusDiagonal", "factor_bytes"]


#: Entries of F in one slab of :meth:`LowRankPlusDiagonal.factor32` and ``rounded_factor`` off
#: NumPy (the temporaries beside the (n, r) results).
SLAB_ENTRIES = 1 << 23


class LowRankPlusDiagonal:
    """The matrix ``K' = F F^T + diag(k - rowsum(F * F))``: a low-rank factor with its diagonal
    corrected to the true diagonal ``k`` (Sec. 3.1), never formed.

    Parameters
    ----------
    F : (n, r) array
        Low-rank factor, e.g. from :func:`weighted_rpcholesky`.
    diag : (n,) array
        The diagonal of the true kernel matrix, ``K.diag()``.
    backend : {"auto", "cpu", "cuda", "xp"} or Backend
        The engine backend of the products ("auto": by the arrays' namespace); pass the kernel
        matrix's ``backend``.
    n_threads : int, optional
        Threads of the compiled :meth:`quad` (default: the usable cores); its value does not
        depend on them.

    Notes
    -----
    ``matvec`` and ``quad`` cost O(n r) arithmetic and ``diag`` O(1); ``K'`` is PSD whenever
    ``F F^T`` under-approximates ``K`` in the PSD order (as RPCholesky's Nystrom factor does).
    :func:`amd` steps on :meth:`rounded`, ``F`` stored in single precision, on every backend.

    See Also
    --------
    weighted_rpcholesky : the factor F (Alg. F.1).
    amd : minimises ``w^T K' w`` over the simplex (Alg. F.2).

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import LowRankPlusDiagonal, weighted_rpcholesky
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X)
    >>> _, F = weighted_rpcholesky(K, rank=16, rng=0)
    >>> op = LowRankPlusDiagonal(F, K.diag(), backend=K.backend)
    >>> w = np.full(256, 1 / 256)
    >>> round(op.quad(w), 4), round(K.quad(w), 4)           # the surrogate and the true w^T K w
    (0.2411, 0.2687)
    """

    def __init__(self, F, diag, *, backend: str = "auto", n_threads: int | None = None):
        self.xp, self.device = aa.namespace(F=F, diag=diag)
        self.backend = get_backend(backend, self.xp)
        self.n_threads = effective_n_threads(n_threads)
        if F.ndim != 2 or diag.ndim != 1 or F.shape[0] != diag.shape[0]:
            raise ValueError(
                f"F must be (n, r) and diag (n,), got shapes {tuple(F.shape)} and "
                f"{tuple(diag.shape)}"
            )
        self.F = F
        self._diag = diag
        # row norms without an (n, r) temporary (at n = 2^20, r = 256 that is 2 GiB)
        self.residual = self._lowrank().lowrank_residual(F, diag, self.n_threads)
        self.n = int(F.shape[0])

    def _lowrank(self):
        """The backend that runs this operator's residual, quadratic form and float32 factor."""
        return runner(self.backend, "lowrank", xp=self.xp)

    def diag(self):
        return self._diag

    def matvec(self, w):
        """``K' w`` in O(n r)."""
        return self.F @ (self.F.T @ w) + self.residual * w

    def quad(self, w, rows=None) -> float:
        """``w^T K' w`` in O(n r); with ``rows`` (host int indices J), ``w^T K'_JJ w`` for w of
        length ``|J|``, in O(``|J|`` r). The value does not depend on ``n_threads``."""
        return self._lowrank().lowrank_quad(self, w, rows)

    def storage_exponent(self) -> int:
        """The power of two e with ``2^-e max|F|`` in [0.5, 1) (0 for a zero or empty F): the
        scale at which F is rounded to float32, so that it neither overflows nor underflows."""
        xp, F = self.xp, self.F
        if F.shape[0] * F.shape[1] == 0:
            return 0
        top = max(float(xp.max(F)), -float(xp.min(F)))  # no (n, r) |F|
        return math.frexp(top)[1] if 0.0 < top < math.inf else 0

    def row_slabs(self):
        """Row ranges of at most SLAB_ENTRIES entries of F: the temporaries of an elementwise
        pass over F stay one bounded slab (64 MiB in float64), not a second (n, r) array."""
        rows = max(1, SLAB_ENTRIES // max(1, int(self.F.shape[1])))
        return [(i, min(self.n, i + rows)) for i in range(0, self.n, rows)]

    def factor32(self):
        """``(G, e)``: ``G = float32(2^-e F)`` in F's namespace and on its device (C-ordered)
        and ``e = storage_exponent()``. Scaling by a power of two is exact, so ``2^e G`` is F
        rounded to single precision (what the compiled AMD loops read). Peak memory: G and one
        bounded slab beside F."""
        return self._lowrank().factor32(self)

    def rounded_factor(self):
        """F rounded to single precision at the scale of :meth:`storage_exponent` and back to
        float64: the exact values the compiled AMD loops multiply by, computed in F's namespace and
        on its device (no host copy), one bounded slab at a time beside the result;
        ``|rounded_factor() - F| <= 2^-24 |F|`` for entries above ``2^(e - 126)``."""
        xp, F = self.xp, self.F
        e = self.storage_exponent()
        down, up = math.ldexp(1.0, -e), math.ldexp(1.0, e)  # exact
        out = xp.empty(F.shape, dtype=xp.float64, device=self.device)
        for i0, i1 in self.row_slabs():
            G = xp.astype(F[i0:i1, ...] * down, xp.float32)
            out[i0:i1, ...] = xp.astype(G, xp.float64) * up
        return out

    def rounded(self) -> LowRankPlusDiagonal:
        """The operator AMD steps on: ``rounded_factor() rounded_factor()^T + diag(residual)``,
        the residual ``k - rowsum(F * F)`` kept from the unrounded F (as the compiled loops do).
        Its diagonal differs from ``k`` by ~1e-7 relative."""
        out = object.__new__(LowRankPlusDiagonal)
        out.__dict__.update(self.__dict__)
        out.F = self.rounded_factor()
        return out

    def dense(self):
        """The (n, n) matrix (tests only)."""
        xp = self.xp
        out = self.F @ self.F.T
        return out + xp.eye(self.n, dtype=out.dtype, device=self.device) * self.residual[None, :]


def factor_bytes(n: int, r: int, xp) -> float:
    """Peak bytes of Low-rank Debiasing's (n, r) float64 factor F and the copy :func:`amd`
    steps on, for arrays of namespace ``xp`` on the default backend: the float32 factor of the
    fused compiled loops, 12 n r in all, else the float64 rounding of the array-API loop,
    16 n r."""
    steps = runner(get_backend("auto", xp), "amd", xp=xp, rank=r)
    return (12.0 if steps.compiled else 16.0) * n * r


class _Dense:
    """An explicit (n, n) matrix in the operator interface ``amd`` uses."""

    def __init__(self, A):
        self.xp, self.device = aa.namespace(K=A)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"K must be a square matrix, got shape {tuple(A.shape)}")
        self.A = val.check_points(A, self.xp, "K")
        self.n = int(A.shape[0])

    def diag(self):
        return self.xp.linalg.diagonal(self.A)

    def matvec(self, w):
        return self.A @ w


def _operator(K):
    if hasattr(K, "matvec") and hasattr(K, "diag"):
        return K
    if array_api_compat.is_array_api_obj(K):
        return _Dense(K)
    raise TypeError(
        "K must be a KernelMatrix, a LowRankPlusDiagonal or an (n, n) array, "
        f"got {type(K).__name__}"
    )


class _Tracker:
    """The stopping rule of :func:`amd` with a monitor: the best checked iterate, and whether
    ``patience`` checks in a row failed to improve on it."""

    def __init__(self, monitor, patience: int, xp):
        self.monitor, self.patience, self.xp = monitor, patience, xp
        self.best, self.best_w, self.best_t, self.bad = math.inf, None, 0, 0
        self.checks = []

    def __call__(self, t: int, w) -> bool:
        value = float(self.monitor(w))
        self.checks.append((t, value))
        if value < self.best:
            self.best, self.best_t, self.bad = value, t, 0
            self.best_w = self.xp.asarray(w, copy=True)
        else:
            self.bad += 1
        return self.bad >= self.patience


def amd(K, steps: int, w0=None, *, agg: bool = False, step_size: float | None = None,
        progress: bool = False, backend="auto", n_threads: int | None = None,
        monitor=None, check_every: int = 32, patience: int = 3, info: dict | None = None):
    """Minimise ``w^T K w`` over the probability simplex by accelerated entropic mirror descent.

    Alg. F.2 (Nesterov's 1-memory method, Wang et al., 2023, Alg. 14, with the entropy
    ``phi(w) = sum_i w_i log w_i``): for t = 1..T, with ``beta_t = 2 / (t + 1)``,
    ``z_t = (1 - beta_t) w_{t-1} + beta_t v_{t-1}``,
    ``v_t ∝ v_{t-1} exp(-2 t eta K z_t)``, ``w_t = (1 - beta_t) w_{t-1} + beta_t v_t``.

    Parameters
    ----------
    K : LowRankPlusDiagonal, KernelMatrix or (n, n) array
        Anything with ``matvec(w)`` and ``diag()``. Low-rank debiasing passes
        ``LowRankPlusDiagonal(F, K.diag())`` = ``F F^T + diag(K - F F^T)`` so that each step
        costs O(n r); a ``KernelMatrix`` works too (O(n^2) per step).
    steps : int
        Number of steps T (App. I.2 uses ``7 sqrt(n)``).
    w0 : (n,) array, optional
        Initial simplex weights (default uniform). Points with ``w0_i = 0`` keep zero weight
        (the multiplicative updates never leave the support of ``w0``).
    agg : bool
        Aggressive step ``eta = 1 / (8 w0^T diag(K))`` instead of ``1 / (8 max_i K_ii)``
        (App. I.2: the former in adaptive rounds after the first).
    step_size : float, optional
        Overrides ``eta``.
    progress : bool
        Show a progress bar over the steps.
    backend : {"auto", "cpu", "cuda", "xp"} or Backend
        The engine backend that runs the steps ("auto": by the arrays' namespace). Pass the
        kernel matrix's ``backend``, as
        :func:`low_rank_debias` does. Backends give the same iterates up to rounding; which
        runs what is in docs/engine.md.
    n_threads : int, optional
        Threads of the compiled steps (default: the usable cores).
    monitor : callable, optional
        ``monitor(w) -> float``, the quantity the caller wants small (Low-rank Debiasing passes
        a resampled KSD of the true kernel, ``resampled_ksd2``).
        Checked every ``check_every`` steps; AMD returns the best checked iterate and stops
        early once ``patience`` checks in a row did not improve on it. ``steps`` stays the cap.
        Without a monitor AMD runs all ``steps`` and returns the last iterate (Alg. F.2).
    check_every, patience : int
        See ``monitor``.
    info : dict, optional
        Filled with ``steps_run`` and, with a monitor, ``best_step`` and ``checks``
        (``(step, value)`` pairs).

    Returns
    -------
    w : (n,) simplex weights in K's namespace and on its device.

    Notes
    -----
    ``f(w_T) - min f <= 16 log(n) max_i K_ii / T^2`` for the default step (Lem. F.3). Cost: T
    matrix-vector products (O(n r) each on a :class:`LowRankPlusDiagonal`, O(n^2) kernel
    evaluations on a kernel matrix) plus O(n T) arithmetic; the updates run in the log domain,
    so weights that underflow stay exactly representable.

    See Also
    --------
    low_rank_debias : Alg. 2, adaptive rounds of weighted RPCholesky then AMD.
    LowRankPlusDiagonal : the O(n r) operator AMD steps on.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import amd
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))   # biased for N(0, I)
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> w = amd(kern.bind(X, -X), 100)                   # 100 steps on the exact kernel matrix
    >>> round(float(w.sum()), 4)
    1.0
    >>> round(sc.ksd(X, -X, kernel=kern), 4), round(sc.ksd(X, -X, weights=w, kernel=kern), 4)
    (0.5183, 0.0551)
    """
    op = _operator(K)
    xp, dev, n = op.xp, op.device, op.n
    lowrank = isinstance(op, LowRankPlusDiagonal)
    backend = check_backend(backend)
    rank = int(op.F.shape[1]) if lowrank else None
    stepper = runner(get_backend(backend, xp), "amd", xp=xp, rank=rank, lowrank=lowrank)
    if isinstance(steps, bool) or not isinstance(steps, int) and not hasattr(steps, "__index__"):
        raise TypeError(f"steps must be an integer, got {type(steps).__name__}")
    steps = int(steps)
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if w0 is None:
        w0 = xp.full((n,), 1.0 / n, dtype=xp.float64, device=dev)
    else:
        aa.namespace(K=op.diag(), w0=w0)
        w0 = val.check_weights(w0, n, xp, "w0", simplex=True)
    dg = op.diag()
    if step_size is None:
        denom = float(xp.sum(w0 * dg)) if agg else float(xp.max(dg))
        if not denom > 0.0:
            raise ValueError("the kernel diagonal must be positive to set the AMD step size")
        eta = 1.0 / (8.0 * denom)
    else:
        eta = float(step_size)
        if not (math.isfinite(eta) and eta > 0):
            raise ValueError(f"step_size must be positive and finite, got {step_size}")
    check_every = val.check_int(check_every, "check_every", lo=1)
    patience = val.check_int(patience, "patience", lo=1)
    track = None if monitor is None else _Tracker(monitor, patience, xp)
    info = {} if info is None else info
    w, run = stepper.amd(op, steps, w0, eta, progress, effective_n_threads(n_threads), track,
                        check_every)
    info["steps_run"] = run
    if track is not None:
        info["best_step"], info["checks"] = track.best_t, track.checks
        if track.best_w is not None:
            w = track.best_w
    return w

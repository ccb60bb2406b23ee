"""The backend protocol: every operation of the engine, declared once.

An engine operation is a row of :data:`OPERATIONS` (what it computes, the row of the capability
table) and one or more methods of :class:`Backend` (the products, the loops, their helpers). A
backend declares the operations it runs in :attr:`Backend.how`, says for which sizes with
:meth:`Backend.supports`, and names in :attr:`Backend.fallbacks` who runs an operation where it
does not; :func:`stein_coreset.engine.dispatch.runner` follows those declarations, both at run
time and for the capability table, so the two cannot drift. No backend calls another's methods
to reach its own loops: a backend implements what it declares and nothing else.

The methods take the :class:`~stein_coreset.engine.KernelMatrix` they run on (``K``), or the
arrays of an operation that has no matrix (AMD's operator, the DKSD pass, Recombination).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Operation", "OPERATIONS", "Backend", "register", "registered"]


@dataclass(frozen=True)
class Operation:
    """One engine operation: ``what`` it computes (the capability table's row) and the
    :class:`Backend` ``methods`` that carry it (a backend that declares the operation implements
    every one of them)."""

    what: str
    methods: tuple[str, ...]


#: The engine's operations, in the order of the capability table.
OPERATIONS: dict[str, Operation] = {
    "block": Operation("kernel blocks k_P(x_rows, x_cols) and the dense matrix",
                       ("block", "dense", "peak_arrays")),
    "column": Operation("one column of K", ("column",)),
    "matvec": Operation("K w, one slab at a time", ("matvec",)),
    "quad": Operation("w^T K w", ("quad",)),
    "row_means": Operation("row means of K", ("row_means",)),
    "coreset_sums": Operation("sums of K over coresets", ("coreset_sums",)),
    "stein_thinning": Operation("Stein thinning (Alg. D.1)", ("stein_thinning",)),
    "kt_split": Operation("KT-SPLIT (Alg. D.2) and its batched halvings",
                          ("kt_split", "kt_halvings")),
    "kt_swap": Operation("KT-Swap (Alg. D.3)", ("kt_swap_refine",)),
    "kt_swap_ls": Operation("KT-Swap-LS (Alg. G.2)", ("kt_swap_ls",)),
    "weighted_rpcholesky": Operation("weighted RPCholesky (Alg. F.1)", ("weighted_rpcholesky",)),
    "amd": Operation("AMD on F F^T + diag (Alg. F.2)", ("amd",)),
    "lowrank": Operation("F F^T + diag's residual, quadratic form and float32 factor",
                         ("lowrank_residual", "lowrank_quad", "factor32")),
    "recombination": Operation("Recombination (Alg. G.1)", ("recombination",)),
    "simplex_weights": Operation("the simplex and affine weights of a support (QP, Cholesky)",
                                 ("simplex_qp", "affine_weights")),
    "median_distance": Operation("the median pairwise distance (median bandwidth)",
                                 ("median_pairwise_distance",)),
    "dksd_pass": Operation("the DKSD pair pass (Barp et al., 2019, Eq. 7)", ("dksd_pass",)),
    "stein_moments": Operation("Stein's identity moments per coordinate (input diagnostics)",
                               ("stein_moments",)),
}


class Backend:
    """One way of computing the engine's operations (:data:`OPERATIONS`).

    A backend sets :attr:`name`, :attr:`compiled`, :attr:`how` (operation -> who runs it, the
    capability table's cell) and :attr:`fallbacks` (operation -> the backend that runs it where
    this one does not; default ``"xp"``, the reference), and implements every method of every
    operation in :attr:`how`. Instances are stateless singletons; per-matrix state (host copies,
    compiled handles) lives in the :class:`~stein_coreset.engine.KernelMatrix`'s cache.

    The methods below are the protocol: each raises NotImplementedError here, and
    :func:`~stein_coreset.engine.dispatch.runner` never calls one on a backend that does not
    declare its operation.
    """

    #: The name users pass as ``backend=`` ("cpu", "cuda", "xp").
    name: str = ""
    #: Whether the backend runs compiled code (C++ or CUDA) rather than array-API operations.
    compiled: bool = False
    #: Operation -> who runs it on this backend (the capability table's cell).
    how: dict[str, str] = {}
    #: Operation -> the backend that runs it where this one does not (default "xp").
    fallbacks: dict[str, str] = {}

    def supports(self, op: str, **ctx) -> bool:
        """Whether this backend runs ``op`` itself for the context ``ctx`` (e.g. ``xp=``,
        ``rank=``, ``coresets=``, ``ndim=``); where it does not, :meth:`fallback` runs it."""
        if op not in OPERATIONS:
            raise ValueError(f"unknown engine operation {op!r}; one of {', '.join(OPERATIONS)}")
        return op in self.how

    def fallback(self, op: str) -> str:
        """The name of the backend that runs ``op`` where this one does not support it."""
        return self.fallbacks.get(op, "xp")

    def native_namespace(self, xp) -> bool:
        """Whether "auto" picks this backend for arrays of namespace ``xp``."""
        return False

    def accepts(self, xp) -> str | None:
        """None when this backend can hold arrays of namespace ``xp``, else why not."""
        return None

    def __repr__(self) -> str:
        return f"<stein_coreset engine backend {self.name!r}>"

    def __reduce__(self):  # singletons: unpickled (e.g. in a Dask worker) as the same object
        return (registered, (self.name,))

    # ---- kernel products ------------------------------------------------------------------
    def block(self, K, rows, cols=None):
        """k_P(x_rows, x_cols) in K's namespace, (len(rows), len(cols) or n)."""
        raise NotImplementedError

    def dense(self, K):
        """The (n, n) matrix in K's namespace."""
        raise NotImplementedError

    def peak_arrays(self, K) -> int:
        """(rows x cols) float64 arrays alive while :meth:`block` forms a block (the memory
        check of a block)."""
        raise NotImplementedError

    def column(self, K, j: int):
        """Column j of K, (n,), in K's namespace."""
        raise NotImplementedError

    def matvec(self, K, w, block_size: int | None = None):
        """K w for w of shape (n,) or (n, k), in w's namespace."""
        raise NotImplementedError

    def quad(self, K, w) -> float:
        """w^T K w."""
        raise NotImplementedError

    def row_means(self, K, rows):
        """(1/n) sum_j k_P(x_r, x_j) for the host int64 ``rows``, in K's namespace."""
        raise NotImplementedError

    def coreset_sums(self, K, C: np.ndarray) -> np.ndarray:
        """Host (L,) sums of K over the rows of the host int64 (L, m) ``C``."""
        raise NotImplementedError

    # ---- the greedy loops -----------------------------------------------------------------
    def stein_thinning(self, K, m: int, progress: bool = False) -> np.ndarray:
        """Alg. D.1: (m,) host int64 picks in selection order."""
        raise NotImplementedError

    def kt_split(self, K, idx, t: int, delta: float, seed: int, uniforms=None,
                 progress: bool = False) -> np.ndarray:
        """Alg. D.2: (2^t, size) host int64 coresets of the host index sequence idx."""
        raise NotImplementedError

    def kt_halvings(self, K, blocks, delta: float, seeds, progress: bool = False) -> np.ndarray:
        """B independent KT-SPLIT halvings of the rows of the host (B, N) ``blocks``:
        (B, 2, N // 2) host int64 halves."""
        raise NotImplementedError

    def kt_swap_refine(self, K, I, passes: int, sorted_sweeps: bool = False,
                       progress: bool = False) -> int:
        """Alg. D.3 in place on the host int64 coreset I; the number of swaps."""
        raise NotImplementedError

    def kt_swap_ls(self, K, dense, order, fmt: int) -> float:
        """Alg. G.2 in place on the dense (n,) host weights; w^T K w."""
        raise NotImplementedError

    def weighted_rpcholesky(self, K, w, rank: int, rows: int, u: np.ndarray, progress: bool):
        """Alg. F.1: ``(pivots, Ft, scale, sw)``, F^T in the first rows of a zeroed (rows, n)
        array in K's namespace."""
        raise NotImplementedError

    # ---- AMD on a low-rank-plus-diagonal operator -----------------------------------------
    def amd(self, op, steps: int, w0, eta: float, progress: bool, n_threads: int, track,
            check_every: int):
        """Alg. F.2 on the operator ``op``: ``(w, steps run)``."""
        raise NotImplementedError

    def lowrank_residual(self, F, diag, n_threads: int):
        """``diag - rowsum(F * F)``."""
        raise NotImplementedError

    def lowrank_quad(self, op, w, rows=None) -> float:
        """``w^T K' w`` (or ``w^T K'_JJ w`` for J = rows) of a LowRankPlusDiagonal."""
        raise NotImplementedError

    def factor32(self, op):
        """``(G, e)``: ``G = float32(2^-e F)`` in F's namespace."""
        raise NotImplementedError

    # ---- host-side steps with no matrix ---------------------------------------------------
    def recombination(self, A: np.ndarray, x0: np.ndarray, points_major: bool = False,
                      n_threads: int = 1) -> np.ndarray:
        """Alg. G.1: host x >= 0 with A x = A x0 and at most rank(A) nonzeros."""
        raise NotImplementedError

    def simplex_qp(self, KJ: np.ndarray, w0: np.ndarray, max_iter: int):
        """The active-set simplex QP on the host (p, p) block: ``(w, steps)``, or
        ``(None, -1)`` when it needs the eigendecomposition fallback."""
        raise NotImplementedError

    def affine_weights(self, KJ: np.ndarray):
        """The Cholesky path of the affine weights of the host (p, p) block; None: use the
        eigendecomposition fallback."""
        raise NotImplementedError

    def median_pairwise_distance(self, U, n_threads: int = 1) -> float:
        """``numpy.median`` of the pairwise distances of the rows of U."""
        raise NotImplementedError

    # ---- the estimators' DKSD pass --------------------------------------------------------
    def dksd_pass(self, U, V, kind, F, comps, need_grad, block_size=None, n_threads: int = 1):
        """Barp et al. (2019), Eq. 7: ``(total, Gv, Gf)``."""
        raise NotImplementedError

    # ---- the input diagnostics ------------------------------------------------------------
    def stein_moments(self, X, S, w=None):
        """Per coordinate, the (weighted) means of x and s, their variances and covariance:
        ``(moments, spread, n_eff)``, moments a host (5, d) float64 array of the rows xbar,
        sbar, var_x, var_s, cov; ``spread`` the weighted variance of the rows' mean centred
        product (1/d) sum_c (x_c - xbar_c)(s_c - sbar_c), ``n_eff`` the weights' effective
        size (engine/cpu/src_cpp/stein_moments.hpp states them)."""
        raise NotImplementedError


_REGISTRY: dict[str, Backend] = {}


def register(cls):
    """Class decorator: one instance of ``cls`` becomes the backend named ``cls.name``."""
    _REGISTRY[cls.name] = cls()
    return cls


def registered(name: str | None = None):
    """The backend registered as ``name``; without a name, the registry (name -> backend)."""
    return dict(_REGISTRY) if name is None else _REGISTRY[name]

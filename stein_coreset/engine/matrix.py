"""The kernel matrix every algorithm reads k_P through, and what it computes on.

:class:`KernelMatrix` is the matrix of a P-mean-zero kernel k_P on fixed points — the Stein
kernel at (X, S) (:meth:`stein_coreset.kernels.SteinKernel.bind`), or a base kernel centred at
the input for the unbiased baselines (:func:`stein_coreset.kernels.centred_kernel_matrix`, paper
footnote 2). It holds one :class:`~stein_coreset.engine.protocol.Backend`, chosen at
construction, and every operation on it (blocks, products, the loops) is that backend's or,
where the backend declares it does not run one for the sizes asked, its declared fallback's
(:func:`~stein_coreset.engine.dispatch.runner`). Beside it: the whitening map of the
preconditioner M (:class:`Whitening`) and the median pairwise distance of the median bandwidth
(:func:`median_pairwise_distance`).
"""

from __future__ import annotations

import copy
import math
import numbers

import numpy as np

from .. import _array_api as aa
from .._threads import effective_n_threads
from .._validation import check_matrix, check_real_parameter
from .arrays import SLAB_ENTRIES
from .dispatch import get_backend, runner
from .protocol import Backend

__all__ = [
    "Whitening",
    "KernelMatrix",
    "median_pairwise_distance",
    "check_kernel_matrix",
    "with_threads",
]


class Whitening:
    """Cholesky factor of the preconditioner M = L L^T and the maps x -> L^{-1} x, s -> L^T s.

    Attributes
    ----------
    identity : bool
        True when M is None (the identity; ``points`` and ``scores`` return their input).
    M : (d, d) host array or None
        The validated preconditioner.
    L : (d, d) array in the caller's namespace, or None
        Lower Cholesky factor of M (``M = L L^T``).
    LinvT : (d, d) array in the caller's namespace, or None
        ``(L^{-1})^T``, so that whitened points are ``X @ LinvT``.

    Raises ``ValueError`` naming ``M`` on a wrong shape, NaN/inf, or a non-SPD matrix.
    O(d^3) set-up.
    """

    def __init__(self, M, d: int, xp, device):
        self.identity = M is None
        self.M = self.L = self.LinvT = None
        if self.identity:
            return
        if isinstance(M, bool) or isinstance(M, str):
            raise TypeError(f"M must be a (d, d) or (d,) array or a positive number, got {M!r}")
        check_real_parameter(M, "M")  # a complex M: refused, not its real part kept
        if isinstance(M, numbers.Real):
            Mh = np.asarray(M, dtype=np.float64)
        elif isinstance(M, (np.ndarray, list, tuple)):
            try:
                Mh = np.asarray(M, dtype=np.float64)
            except (TypeError, ValueError):
                raise TypeError("M must hold real numbers") from None
        else:
            Mh = aa.to_host(M)
        if Mh.ndim == 0:  # a scalar: M = c I
            Mh = float(Mh) * np.eye(d)
        elif Mh.shape == (d,):  # a diagonal
            Mh = np.diag(Mh)
        if Mh.shape != (d, d):
            raise ValueError(
                f"M must have shape ({d}, {d}) or ({d},), or be a number, to match the points; "
                f"got shape {Mh.shape}"
            )
        if not np.all(np.isfinite(Mh)):
            raise ValueError("M has NaN or inf entries")
        if not np.allclose(Mh, Mh.T, rtol=1e-10, atol=1e-12 * np.abs(Mh).max()):
            raise ValueError("M must be symmetric positive definite; it is not symmetric")
        try:
            L = np.linalg.cholesky(Mh)
        except np.linalg.LinAlgError:
            raise ValueError(
                "M must be symmetric positive definite; its Cholesky factorisation failed"
            ) from None
        Linv = np.linalg.solve(L, np.eye(d))
        self.M = Mh
        self.LinvT = aa.from_host(np.ascontiguousarray(Linv.T), xp=xp, device=device)
        self.L = aa.from_host(np.ascontiguousarray(L), xp=xp, device=device)

    def points(self, X):
        """Whitened points ``L^{-1} x`` (rows of X)."""
        return X if self.identity else X @ self.LinvT

    def scores(self, S):
        """Whitened scores ``L^T s`` (rows of S)."""
        return S if self.identity else S @ self.L


def median_pairwise_distance(U, n_threads: int = 1) -> float:
    """``numpy.median`` of the m (m - 1) / 2 distances of the pairs i < j of the rows of U.

    NumPy arrays are evaluated in C++ on a team of ``n_threads``
    (``engine/cpu/src_cpp/pairwise.hpp``), the distances summed coordinate by coordinate exactly
    as :func:`squared_distances` sums them, so the value is the same bit for bit as the
    array-API evaluation other namespaces use (which stays on their device until the final
    median) and does not depend on ``n_threads``. O(m^2 d).
    """
    xp, _ = aa.namespace(U=U)
    return runner(get_backend("auto", xp), "median_distance", xp=xp).median_pairwise_distance(
        U, n_threads)


def stein_moments(X, S, w=None):
    """Per coordinate, the (weighted) means of the rows of X and S, their variances and
    covariance, and the noise of the covariances' mean: ``(moments, spread, n_eff)`` with
    moments a host (5, d) array of the rows xbar, sbar, var_x, var_s, cov (the input diagnostics'
    Stein residuals; formulas in ``engine/cpu/src_cpp/stein_moments.hpp``).

    NumPy arrays are read in C++ (serial, two passes); other namespaces stay on their device
    (the array-API reference, in blocks of columns) until 5 d numbers go to the host. The two
    agree to rounding (row-by-row sums against NumPy's pairwise ones). O(n d).
    """
    xp, _ = aa.namespace(X=X, S=S, w=w)
    return runner(get_backend("auto", xp), "stein_moments", xp=xp).stein_moments(X, S, w)


class KernelMatrix:
    """The n x n matrix of a P-mean-zero kernel k_P on fixed points, never formed in full.

    Built by :meth:`~stein_coreset.kernels.SteinKernel.bind` (Stein kernel) or
    :func:`~stein_coreset.kernels.centred_kernel_matrix` (a base kernel centred at the input).
    ``base`` is the base kernel (a :class:`~stein_coreset.kernels.RadialKernel`: the engine
    reads its ``radial``, ``code``, ``sigma`` and ``beta``, and does not import the kernels),
    ``U`` whitened points, ``T`` whitened scores or ``None``, ``mean``/``mean_all`` the
    centring of a base kernel.

    The matrix holds one backend (:attr:`backend`, a :class:`~stein_coreset.engine.Backend`),
    chosen once at construction by :func:`~stein_coreset.engine.get_backend`: ``"cpu"`` (the
    C++ evaluator, a thread team) for NumPy arrays, ``"cuda"`` (CUDA kernels compiled at run
    time) for CuPy arrays, ``"xp"`` (the array-API reference) for any other namespace and for
    a base kernel the compiled code does not know (a subclass of IMQ, Gaussian or Matern
    included; an explicit "cpu"/"cuda" refuses it). Its methods are the engine's operations:
    each asks :meth:`runner` who runs it for the sizes at hand (the backend, or the fallback
    it declares) and calls that backend.

    ``n_threads``: the team size of every C++ evaluation on this matrix (None: the usable cores,
    :func:`stein_coreset._threads.effective_n_threads`); kept by :meth:`take` and friends.
    """

    def __init__(
        self,
        base,
        U,
        T=None,
        mean=None,
        mean_all: float = 0.0,
        backend: str | Backend = "auto",
        n_threads=None,
    ):
        self.n_threads = effective_n_threads(n_threads)
        # a snapshot: the cached host handle and every backend read the parameters the matrix
        # was built with, whatever the caller's kernel object is set to later
        self.base = copy.copy(base)
        self.U = U
        self.T = T
        self.mean = mean
        self.mean_all = float(mean_all)
        self.xp, self.device = aa.namespace(U=U, T=T, mean=mean)
        self.n, self.d = int(U.shape[0]), int(U.shape[1])
        self.backend: Backend = get_backend(backend, self.xp, base)
        # host copies + SoA layout (the _core.Kernel handle), the CUDA kernel and the diagonal,
        # shared by every with_threads() view of this matrix and built at most once among them
        self._cache = {}

    def with_backend(self, backend: str | Backend) -> KernelMatrix:
        """The same matrix evaluated by another backend."""
        return KernelMatrix(
            self.base, self.U, self.T, self.mean, self.mean_all, backend, self.n_threads
        )

    def using(self, backend: str | Backend) -> KernelMatrix:
        """This matrix when ``backend`` is "auto" or its own backend, else
        :meth:`with_backend`."""
        if backend == "auto" or get_backend(backend) is self.backend:
            return self
        return self.with_backend(backend)

    def with_threads(self, n_threads) -> KernelMatrix:
        """The same matrix (sharing its cached handle) evaluated with another team size."""
        out = KernelMatrix(
            self.base, self.U, self.T, self.mean, self.mean_all, self.backend, n_threads
        )
        out._cache = self._cache
        return out

    def take(self, idx) -> KernelMatrix:
        """The kernel matrix restricted to the points ``idx`` (same kernel, same centring)."""
        xp = self.xp
        idx = aa.as_index_array(xp, idx, self.device)
        T = None if self.T is None else xp.take(self.T, idx, axis=0)
        mean = None if self.mean is None else xp.take(self.mean, idx, axis=0)
        return KernelMatrix(
            self.base,
            xp.take(self.U, idx, axis=0),
            T,
            mean,
            self.mean_all,
            self.backend,
            self.n_threads,
        )

    def _check_block(self, r: int, c: int, name: str, what: str) -> None:
        check_matrix(r, c, name, what, like=self.U,
                     copies=self.runner("block").peak_arrays(self))

    def block(self, rows, cols=None):
        """Block k_P(x_rows, x_cols) in the array namespace, shape (len(rows), len(cols) or n).
        A block larger than the memory it would live in is a ValueError naming rows / cols,
        before anything is allocated."""
        r = int(rows.shape[0]) if hasattr(rows, "shape") else len(rows)
        c = self.n if cols is None else (int(cols.shape[0]) if hasattr(cols, "shape")
                                          else len(cols))
        self._check_block(r, c, "rows" if cols is None else "rows, cols",
                          "the kernel block K.block(rows, cols)")
        return self.runner("block").block(self, rows, cols)

    def cross(self, V, W=None):
        """k_P(x_i, y_j) against new (whitened) points V with whitened scores W; no centring.
        Array-API evaluation."""
        if self.mean is not None:
            raise ValueError("cross evaluations of a centred kernel are not defined")
        return get_backend("xp").entries(self, self.U, V, self.T, W)

    def runner(self, op: str, **ctx) -> Backend:
        """The backend that runs the engine operation ``op`` on this matrix for the context
        ``ctx`` (:func:`~stein_coreset.engine.dispatch.runner`)."""
        return runner(self.backend, op, **ctx)

    def _radial_at_zero(self) -> tuple[float, float]:
        """(kappa(0), kappa'(0)) of the base kernel: the two constants of the diagonal."""
        xp = self.xp
        k0, k1, _ = self.base.radial(xp, xp.zeros((1,), dtype=xp.float64, device=self.device))
        return float(k0[0]), float(k1[0])

    def diag(self):
        """k_P(x_i, x_i), shape (n,), in the array namespace (cached)."""
        if "diag" not in self._cache:
            xp = self.xp
            k0, k1 = self._radial_at_zero()
            if self.T is None:
                dg = xp.full((self.n,), k0, dtype=xp.float64, device=self.device)
            else:
                dg = xp.sum(self.T * self.T, axis=1) * k0 - 2.0 * self.d * k1
            if self.mean is not None:
                dg = dg + self.mean_all - 2.0 * self.mean
            self._cache["diag"] = dg
        return self._cache["diag"]

    def diag_is_finite(self) -> bool:
        """Whether every k_P(x_i, x_i) is finite. Without centring, |k_P(x, x)| <= d max|T|^2
        |k0| + 2 d |k1|; when that bound is far from overflow one whole-array reduction answers
        and the diagonal is not formed (it is what compress checks before every Stein method)."""
        if "diag" not in self._cache and self.T is not None and self.mean is None:
            k0, k1 = self._radial_at_zero()
            tmax = float(self.xp.max(self.xp.abs(self.T)))
            bound = self.d * tmax * tmax * abs(k0) + 2.0 * self.d * abs(k1)
            if math.isfinite(bound) and bound < 1e300:
                return True
        return bool(self.xp.all(self.xp.isfinite(self.diag())))

    def dense(self):
        """The full (n, n) matrix; O(n^2) memory, for small n and tests. A matrix larger than
        the memory it would live in is a ValueError naming X, before anything is allocated."""
        self._check_block(self.n, self.n, "X", f"the dense kernel matrix of n = {self.n} points")
        return self.runner("block").dense(self)

    def slabs(self, block_size: int | None = None):
        """Yield ``(start, stop)`` row ranges whose (rows x n) slabs hold at most SLAB_ENTRIES."""
        b = block_size or max(1, SLAB_ENTRIES // max(self.n, 1))
        for start in range(0, self.n, b):
            yield start, min(self.n, start + b)

    def matvec(self, w, block_size: int | None = None):
        """K w with K never held: O(n^2 d) work, O(block n) memory (one (block x n) slab at a
        time; on "cpu", from K's upper triangle: n (n + 1) / 2 evaluations). ``w`` may be (n,)
        or (n, k)."""
        return self.runner("matvec", ndim=w.ndim).matvec(self, w, block_size)

    def quad(self, w) -> float:
        """w^T K w (the squared MMD_{k_P} of the signed measure sum_i w_i delta_{x_i} to P)."""
        return self.runner("quad").quad(self, w)

    def column(self, j: int):
        """Column k_P(x_i, x_j), shape (n,), in the array namespace. O(n d)."""
        return self.runner("column").column(self, j)

    def row_means(self, rows):
        """(1/n) sum_j k_P(x_r, x_j) for r in ``rows`` (host int sequence), in the array
        namespace: O(len(rows) n) evaluations, never more than one slab held."""
        return self.runner("row_means").row_means(self, aa.host_indices(rows))

    def coreset_sums(self, coresets) -> np.ndarray:
        """(L,) host sums sum_{a,b} k_P(C[l, a], C[l, b]) of L equal-size coresets (rows of the
        host int array ``coresets``): O(L m^2) evaluations."""
        return self.runner("coreset_sums").coreset_sums(
            self, np.ascontiguousarray(coresets, dtype=np.int64))

    # ---- the loops (each the algorithm's compiled or reference body; the paper's logic
    # around it lives in stein_coreset.algorithms) ----------------------------------------------
    def stein_thinning(self, m: int, progress: bool = False) -> np.ndarray:
        """Greedy Stein thinning (Alg. D.1): (m,) host int64 picks in selection order."""
        return self.runner("stein_thinning").stein_thinning(self, m, progress)

    def kt_split(self, idx, t: int, delta: float, seed: int, uniforms=None,
                 progress: bool = False) -> np.ndarray:
        """KT-SPLIT (Alg. D.2) of the host index sequence ``idx`` in ``t`` rounds: (2^t, size)
        host int64 coresets."""
        return self.runner("kt_split", coresets=1 << int(t)).kt_split(
            self, idx, t, delta, seed, uniforms, progress)

    def kt_halvings(self, blocks, delta: float, seeds, progress: bool = False) -> np.ndarray:
        """Independent KT-SPLIT halvings (Alg. D.2, t = 1) of the rows of the host (B, N)
        ``blocks``: (B, 2, N // 2) host int64 halves."""
        return self.runner("kt_split", coresets=int(blocks.shape[0])).kt_halvings(
            self, blocks, delta, seeds, progress)

    def kt_swap_refine(self, I, passes: int, sorted_sweeps: bool = False,
                       progress: bool = False) -> int:
        """Greedy KT-Swap (Alg. D.3) in place on the host int64 coreset I; the number of
        swaps."""
        return self.runner("kt_swap").kt_swap_refine(self, I, passes, sorted_sweeps, progress)

    def kt_swap_ls(self, dense, order, fmt: int) -> float:
        """KT-Swap-LS (Alg. G.2) in place on the dense (n,) host weights; w^T K w."""
        return self.runner("kt_swap_ls").kt_swap_ls(self, dense, order, fmt)

    def weighted_rpcholesky(self, w, rank: int, rows: int, u: np.ndarray, progress: bool):
        """Weighted RPCholesky (Alg. F.1): ``(pivots, Ft, scale, sw)``."""
        return self.runner("weighted_rpcholesky", rank=rank, xp=self.xp).weighted_rpcholesky(
            self, w, rank, rows, u, progress)


def check_kernel_matrix(K, name: str = "K") -> KernelMatrix:
    """``K`` must be a :class:`KernelMatrix`."""
    if not isinstance(K, KernelMatrix):
        raise TypeError(f"{name} must be a KernelMatrix, got {type(K).__name__}")
    return K


def with_threads(K, n_threads, name: str = "K") -> KernelMatrix:
    """``K`` with the team size ``n_threads`` of its C++ evaluations, or ``K`` itself when
    ``n_threads`` is None; a wrong ``K`` is a TypeError naming it (checked before n_threads)."""
    if n_threads is None:
        return K
    return check_kernel_matrix(K, name).with_threads(n_threads)

"""The kernel-matrix engine: the implicit n x n matrix every algorithm reads k_P through.

:class:`KernelMatrix` is the matrix of a P-mean-zero kernel k_P on fixed points — the Stein
kernel at (X, S) (:meth:`stein_coreset.kernels.SteinKernel.bind`), or a base kernel centred at
the input for the unbiased baselines (:func:`stein_coreset.kernels.centred_kernel_matrix`, paper
footnote 2). It picks its backend (:data:`BACKENDS`) once, at construction, and offers blocks,
the diagonal, blocked products and a C++ handle for the serial loops of
:mod:`stein_coreset.algorithms._native`.

The engine also holds what it computes on: the whitening map of the preconditioner M
(:class:`Whitening`), squared distances formed coordinate by coordinate
(:func:`squared_distances`) and the median pairwise distance of the median bandwidth
(:func:`median_pairwise_distance`). Together with :mod:`stein_coreset.algorithms._native` it is
the only module that calls the compiled code (``_core``, :mod:`stein_coreset._cuda`); it does
not know the kernel classes, which :mod:`stein_coreset.kernels` registers with
:func:`compiled_kernel`.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

import numpy as np

from . import _array_api as aa
from . import _core
from ._threads import effective_n_threads

if TYPE_CHECKING:  # annotations only: the kernels import the engine, not the reverse
    from .kernels import RadialKernel

__all__ = [
    "Whitening",
    "KernelMatrix",
    "squared_distances",
    "median_pairwise_distance",
    "BACKENDS",
    "SLAB_ENTRIES",
    "COMPILED_KERNELS",
    "compiled_kernel",
    "resolve_backend",
    "backend_name",
    "is_compiled_kernel",
]

#: Largest number of entries of one (block x n) slab held at a time by blocked products.
SLAB_ENTRIES = 1 << 22

#: The base-kernel classes the compiled backends (C++ and CUDA) evaluate by their ``code``,
#: registered by :mod:`stein_coreset.kernels` with :func:`compiled_kernel`.
COMPILED_KERNELS: list[type] = []


def compiled_kernel(cls):
    """Class decorator: the compiled backends know the formula of exactly this class (its
    ``code``); a subclass is not compiled, its ``radial`` may differ."""
    COMPILED_KERNELS.append(cls)
    return cls


def squared_distances(xp, U, V):
    """Squared Euclidean distances between the rows of U and V, (n, n'), clipped at 0.

    O(n n' d). Used by the base-kernel Gram matrices and the discrepancies. The differences are
    formed coordinate by coordinate, not by the ||u||^2 + ||v||^2 - 2 u.v expansion, which
    cancels catastrophically for points far from the origin (X + 1e8) and near the diagonal;
    so the result is invariant to a shift of the data.
    """
    q = xp.zeros((U.shape[0], V.shape[0]), dtype=U.dtype, device=aa.device_of(U))
    for c in range(U.shape[1]):
        diff = U[:, c : c + 1] - V[:, c][None, :]
        q = q + diff * diff
    return q


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

    NumPy arrays are evaluated in C++ on a team of ``n_threads`` (src_cpp/pairwise.hpp), the
    distances summed coordinate by coordinate exactly as :func:`squared_distances` sums them, so
    the value is the same bit for bit as the array-API evaluation other namespaces use (which
    stays on their device until the final median) and does not depend on ``n_threads``.
    O(m^2 d).
    """
    xp, _ = aa.namespace(U=U)
    if aa.is_numpy(xp):
        Uh = np.ascontiguousarray(aa.to_host(U), dtype=np.float64)
        return float(_core.median_pairwise_distance(Uh, n_threads))
    return _median_pairwise_distance_xp(U, xp)


def _median_pairwise_distance_xp(U, xp) -> float:
    """``numpy.median`` of the pairwise distances of the rows of U, in U's namespace: the
    (m, m) squared distances on U's device, the median of the upper triangle on the host.
    The definition the C++ evaluation (src_cpp/pairwise.hpp) reproduces."""
    m = U.shape[0]
    D = aa.to_host(xp.sqrt(squared_distances(xp, U, U)))
    return float(np.median(D[np.triu_indices(m, k=1)]))


#: The engine's backends (see :class:`KernelMatrix`).
BACKENDS = ("cpu", "cuda", "xp")
_BACKEND_ALIASES = {"cpp": "cpu", "array_api": "xp"}


def is_compiled_kernel(base) -> bool:
    """Whether the compiled backends (C++ and CUDA) know this base kernel: exactly
    :class:`~stein_coreset.kernels.IMQ`, :class:`~stein_coreset.kernels.Gaussian` or
    :class:`~stein_coreset.kernels.Matern`, not a subclass (whose ``radial`` may
    differ from the compiled formula its ``code`` names)."""
    return type(base) in COMPILED_KERNELS


def backend_name(backend) -> str:
    """``backend`` checked and spelled canonically: "auto" or one of :data:`BACKENDS` (the
    aliases "cpp" and "array_api" mean "cpu" and "xp"); ValueError for anything else."""
    name = _BACKEND_ALIASES.get(backend, backend) if isinstance(backend, str) else backend
    if name != "auto" and name not in BACKENDS:
        raise ValueError(
            f"backend must be 'auto' or one of {', '.join(map(repr, BACKENDS))}, got {backend!r}"
        )
    return name


def resolve_backend(backend, xp, *bases) -> str:
    """The backend a computation on arrays of namespace ``xp`` with the base kernels ``bases``
    uses (one of :data:`BACKENDS`); ``backend`` is "auto", one of BACKENDS or an alias.
    "auto" gives "xp" as soon as one base kernel is not compiled; a compiled backend asked
    for by name refuses such a kernel rather than evaluate another one."""
    name = backend_name(backend)
    unknown = [b for b in bases if not is_compiled_kernel(b)]
    if name == "auto":
        if unknown:
            return "xp"
        if aa.is_numpy(xp):
            return "cpu"
        return "cuda" if aa.is_cupy(xp) else "xp"
    if name != "xp" and unknown:
        raise ValueError(
            f"backend {name!r} cannot evaluate {type(unknown[0]).__name__}: the compiled backends "
            f"know only {', '.join(c.__name__ for c in COMPILED_KERNELS)}; use backend='xp'"
        )
    if name == "cuda" and not aa.is_cupy(xp):
        raise ValueError("backend 'cuda' needs CuPy arrays")
    return name


class KernelMatrix:
    """The n x n matrix of a P-mean-zero kernel k_P on fixed points, never formed in full.

    Built by :meth:`~stein_coreset.kernels.SteinKernel.bind` (Stein kernel) or
    :func:`~stein_coreset.kernels.centred_kernel_matrix`
    (a base kernel centred at the input). ``U`` are whitened points, ``T`` whitened scores or
    ``None``, ``mean``/``mean_all`` the centring of a base kernel.

    The engine: the matrix picks its backend once, at construction, and every algorithm reads
    k_P through its operations (blocks, columns, products, the diagonal) and the loop module
    :mod:`stein_coreset.algorithms._native` (Stein thinning, KT-SPLIT, KT-Swap, ...), which
    follows :attr:`backend`. The backends (:data:`BACKENDS`):

    - ``"cpu"``: the C++ evaluator of ``_core`` on host arrays (O(d) per entry, a thread team);
    - ``"cuda"``: CUDA kernels compiled at run time (:mod:`stein_coreset._cuda`) on CuPy arrays,
      the greedy loops on the device;
    - ``"xp"``: the array-API reference (any namespace, array_api_strict included; the oracle the
      compiled backends are tested against). Its serial loops (KT-SPLIT, KT-Swap, ...) run in
      C++ on one explicit host copy of the points.

    ``backend="auto"`` chooses ``"cpu"`` for NumPy, ``"cuda"`` for CuPy, ``"xp"`` otherwise. A
    base kernel the compiled code does not know (any class other than :class:`IMQ`,
    :class:`Gaussian`, :class:`Matern`, subclasses included) is evaluated by the reference:
    "auto" then gives ``"xp"``, an explicit "cpu"/"cuda" is refused, and the C++-only loops
    refuse it with a ValueError rather than evaluate another kernel. The spellings "cpp" and
    "array_api" are accepted for "cpu" and "xp".

    ``n_threads``: the team size of every C++ evaluation on this matrix (None: the usable cores,
    :func:`stein_coreset._threads.effective_n_threads`); kept by :meth:`take` and friends.
    """

    def __init__(
        self,
        base: RadialKernel,
        U,
        T=None,
        mean=None,
        mean_all: float = 0.0,
        backend="auto",
        n_threads=None,
    ):
        self.n_threads = effective_n_threads(n_threads)
        self.base = base
        self.U = U
        self.T = T
        self.mean = mean
        self.mean_all = float(mean_all)
        self.xp, self.device = aa.namespace(U=U, T=T, mean=mean)
        self.n, self.d = int(U.shape[0]), int(U.shape[1])
        self.backend = resolve_backend(backend, self.xp, base)
        # host copies + SoA layout (the _core.Kernel handle) and the diagonal, shared by every
        # with_threads() view of this matrix and built at most once among them
        self._cache = {}

    @property
    def uses_cpp(self) -> bool:
        """Whether the C++ evaluator computes this matrix's blocks (backend "cpu")."""
        return self.backend == "cpu"

    def cuda(self):
        """The :class:`stein_coreset._cuda.CudaKernel` of this matrix (backend "cuda"; cached)."""
        if "cuda" not in self._cache:
            from ._cuda import CudaKernel

            self._cache["cuda"] = CudaKernel(
                int(self.base.code), float(self.base.sigma), float(self.base.beta),
                self.U, self.T, self.mean, self.mean_all,
            )
        return self._cache["cuda"]

    def with_backend(self, backend: str) -> KernelMatrix:
        """The same matrix evaluated by another backend."""
        return KernelMatrix(
            self.base, self.U, self.T, self.mean, self.mean_all, backend, self.n_threads
        )

    def with_threads(self, n_threads) -> KernelMatrix:
        """The same matrix (sharing its cached handle) evaluated with another team size."""
        out = KernelMatrix(
            self.base, self.U, self.T, self.mean, self.mean_all, self.backend, n_threads
        )
        out._cache = self._cache
        return out

    @property
    def is_stein(self) -> bool:
        return self.T is not None

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

    def _entries(self, Ua, Ub, Ta=None, Tb=None, ma=None, mb=None):
        # Differences are formed coordinate by coordinate (not by the |a|^2 + |b|^2 - 2ab
        # expansion): near the diagonal the expansion cancels, and sqrt(q) (Matern) amplifies it.
        xp = self.xp
        q = xp.zeros((Ua.shape[0], Ub.shape[0]), dtype=xp.float64, device=self.device)
        ut = None if Ta is None else xp.zeros_like(q)
        for c in range(self.d):
            du = Ua[:, c : c + 1] - Ub[:, c][None, :]
            q = q + du * du
            if Ta is not None:
                ut = ut + du * (Ta[:, c : c + 1] - Tb[:, c][None, :])
        k0, k1, qk2 = self.base.radial(xp, q)
        if Ta is None:
            out = k0
        else:
            out = k0 * (Ta @ Tb.T) - 2.0 * k1 * ut - 4.0 * qk2 - (2.0 * self.d) * k1
        if ma is not None:
            out = out + self.mean_all - ma[:, None] - mb[None, :]
        return out

    def _peak_arrays(self) -> int:
        """(n x n') float64 arrays alive while a block is formed: the C++ and CUDA evaluators
        write the output only (and a copy into another namespace); the array-API reference
        forms q, the differences, the radial terms and the Stein combination."""
        if self.backend in ("cpu", "cuda"):
            return 1 if isinstance(self.U, np.ndarray) or self.backend == "cuda" else 2
        return 8 if self.T is not None else 4

    def _check_block(self, r: int, c: int, name: str, what: str) -> None:
        from ._validation import check_matrix  # _validation imports this module

        check_matrix(r, c, name, what, like=self.U, copies=self._peak_arrays())

    def block(self, rows, cols=None):
        """Block k_P(x_rows, x_cols) in the array namespace, shape (len(rows), len(cols) or n).
        A block larger than the memory it would live in is a ValueError naming rows / cols,
        before anything is allocated."""
        r = int(rows.shape[0]) if hasattr(rows, "shape") else len(rows)
        c = self.n if cols is None else (int(cols.shape[0]) if hasattr(cols, "shape")
                                          else len(cols))
        self._check_block(r, c, "rows" if cols is None else "rows, cols",
                          "the kernel block K.block(rows, cols)")
        if self.backend == "cpu":
            out = self.block_cpp(
                aa.host_indices(rows), None if cols is None else aa.host_indices(cols)
            )
            return aa.from_host(out, xp=self.xp, device=self.device)
        xp = self.xp
        if self.backend == "cuda":
            rows = aa.as_index_array(xp, rows, self.device)
            cols = None if cols is None else aa.as_index_array(xp, cols, self.device)
            return self.cuda().gram(rows, cols)
        rows = aa.as_index_array(xp, rows, self.device)
        take = lambda A, i: None if A is None else xp.take(A, i, axis=0)  # noqa: E731
        if cols is None:
            Ub, Tb, mb = self.U, self.T, self.mean
        else:
            cols = aa.as_index_array(xp, cols, self.device)
            Ub, Tb, mb = take(self.U, cols), take(self.T, cols), take(self.mean, cols)
        return self._entries(
            take(self.U, rows), Ub, take(self.T, rows), Tb, take(self.mean, rows), mb
        )

    def cross(self, V, W=None):
        """k_P(x_i, y_j) against new (whitened) points V with whitened scores W; no centring."""
        if self.mean is not None:
            raise ValueError("cross evaluations of a centred kernel are not defined")
        return self._entries(self.U, V, self.T, W)

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
        if self.backend == "cpu":
            return aa.from_host(self.block_cpp(np.arange(self.n)), xp=self.xp, device=self.device)
        if self.backend == "cuda":
            return self.block(self.xp.arange(self.n, dtype=self.xp.int64, device=self.device))
        return self._entries(self.U, self.U, self.T, self.T, self.mean, self.mean)

    def slabs(self, block_size: int | None = None):
        """Yield ``(start, stop)`` row ranges whose (rows x n) slabs hold at most SLAB_ENTRIES."""
        b = block_size or max(1, SLAB_ENTRIES // max(self.n, 1))
        for start in range(0, self.n, b):
            yield start, min(self.n, start + b)

    def matvec(self, w, block_size: int | None = None):
        """K w with K never held: one (block x n) slab at a time. O(n^2 d) work, O(block n) memory.
        On "cpu" (w of shape (n,)) from K's upper triangle up to n = 2^17: n (n + 1) / 2
        evaluations, 32 accumulators of n doubles (256 n bytes, at most 32 MiB).

        ``w`` may be (n,) or (n, k).
        """
        if self.backend == "cpu" and w.ndim == 1:
            return aa.from_host(self.matvec_cpp(aa.to_host(w)), like=w)
        if self.backend == "cuda" and w.ndim == 1:
            return self.cuda().matvec(w)
        xp = self.xp
        parts = []
        for a, b in self.slabs(block_size):
            rows = xp.arange(a, b, dtype=xp.int64, device=self.device)
            parts.append(self.block(rows) @ w)
        return xp.concat(parts, axis=0)

    def quad(self, w) -> float:
        """w^T K w (the squared MMD_{k_P} of the signed measure sum_i w_i delta_{x_i} to P).
        On "cpu", from K's upper triangle: n (n + 1) / 2 evaluations, half of a product's."""
        if self.backend == "cpu":
            w = np.ascontiguousarray(aa.to_host(w), dtype=np.float64)
            return float(_core.quad_soa(self.handle(), w, self.n_threads))
        return float(self.xp.sum(w * self.matvec(w)))

    def column(self, j: int):
        """Column k_P(x_i, x_j), shape (n,), in the array namespace. O(n d)."""
        if self.backend == "cpu":
            return aa.from_host(
                _core.kernel_column(self.handle(), int(j), self.n_threads),
                xp=self.xp,
                device=self.device,
            )
        xp = self.xp
        return xp.reshape(self.block(xp.asarray([int(j)], dtype=xp.int64, device=self.device)),
                          (self.n,))

    def row_means(self, rows):
        """(1/n) sum_j k_P(x_r, x_j) for r in ``rows`` (host int sequence), in the array
        namespace: O(len(rows) n) evaluations, never more than one slab held."""
        xp, dev = self.xp, self.device
        rows = aa.host_indices(rows)
        if self.backend == "cpu":
            return aa.from_host(
                _core.kernel_row_means(self.handle(), rows, self.n_threads), xp=xp, device=dev
            )
        ones = xp.full((self.n,), 1.0 / self.n, dtype=xp.float64, device=dev)
        b = max(1, SLAB_ENTRIES // max(self.n, 1))
        return xp.concat(
            [self.block(rows[a : a + b]) @ ones for a in range(0, rows.size, b)], axis=0
        )

    def coreset_sums(self, coresets) -> np.ndarray:
        """(L,) host sums sum_{a,b} k_P(C[l, a], C[l, b]) of L equal-size coresets (rows of the
        host int array ``coresets``): O(L m^2) evaluations."""
        C = np.ascontiguousarray(coresets, dtype=np.int64)
        if self.backend == "cpu":
            return _core.coreset_sums(self.handle(), C, self.n_threads)
        xp = self.xp  # L sums on the device, one transfer
        return aa.to_host(xp.stack([xp.sum(self.block(c, c)) for c in C]))

    # ---- the C++ side -------------------------------------------------------------------
    def handle(self):
        """A ``_core.Kernel`` over host copies of the whitened points and their
        structure-of-arrays layout (one transfer, one layout, cached and shared by
        :meth:`with_threads`)."""
        if "handle" not in self._cache:
            if not is_compiled_kernel(self.base):
                raise ValueError(
                    f"kernel: {type(self.base).__name__} is not a base kernel the compiled "
                    f"loops know ({', '.join(c.__name__ for c in COMPILED_KERNELS)}); this "
                    "step (KT-SPLIT, KT-Swap, KT-Swap-LS, RPCholesky or the C++ evaluator) "
                    "cannot evaluate it. Use a built-in kernel, or a method that needs only "
                    "kernel blocks (e.g. 'st')"
                )
            U = aa.to_host(self.U)
            T = None if self.T is None else aa.to_host(self.T)
            mean = None if self.mean is None else aa.to_host(self.mean)
            self._cache["handle"] = _core.Kernel(
                int(self.base.code),
                float(self.base.sigma),
                float(self.base.beta),
                U,
                T,
                mean,
                self.mean_all,
            )
        return self._cache["handle"]

    def block_cpp(self, rows, cols=None) -> np.ndarray:
        """Host block from the C++ evaluator (rows/cols are host int64 sequences)."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        cols = None if cols is None else np.ascontiguousarray(cols, dtype=np.int64)
        return _core.gram(self.handle(), rows, cols, self.n_threads)

    def matvec_cpp(self, w) -> np.ndarray:
        # the vectorised evaluator of src_cpp/soa_kernel
        return _core.matvec_soa(
            self.handle(), np.ascontiguousarray(w, dtype=np.float64), self.n_threads
        )

"""Base kernels, the Stein kernel k_p and the implicit kernel matrix the algorithms work on.

Base kernels are radial in the M-norm, k(x, y) = kappa(||x - y||_M^2) with
||x - y||_M^2 = (x - y)^T M^{-1} (x - y). The Stein kernel (Def. 1, Prop. B.5) of a radial base is

    k_p(x, y) = kappa <s_x, M s_y> - 2 kappa' <x - y, s_x - s_y> - 4 q kappa'' - 2 d kappa',

evaluated in O(d) per entry after whitening once (App. I.1): with M = L L^T, u = L^{-1} x and
t = L^T s: q = ||u_x - u_y||^2, <s_x, M s_y> = <t_x, t_y> and
<x - y, s_x - s_y> = <u_x - u_y, t_x - t_y>.

:class:`KernelMatrix` is the n x n matrix of a P-mean-zero kernel k_P on fixed points — the Stein
kernel at (X, S), or a base kernel centred at the input for the unbiased baselines (paper
footnote 2). Every algorithm reads the kernel only through it: blocks, the diagonal, blocked
products, and a C++ handle for the serial loops.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from . import _array_api as aa
from . import _core
from . import _validation as val
from ._threads import effective_n_threads

__all__ = [
    "RadialKernel",
    "Whitening",
    "IMQ",
    "Gaussian",
    "Matern",
    "SteinKernel",
    "KernelMatrix",
    "median_bandwidth",
    "squared_distances",
    "centred_kernel_matrix",
    "BACKENDS",
    "resolve_backend",
    "is_compiled_kernel",
]

#: Largest number of entries of one (block x n) slab held at a time by blocked products.
SLAB_ENTRIES = 1 << 22


class RadialKernel:
    """A base kernel k(x, y) = kappa(||x - y||_M^2); subclasses give kappa and its derivatives.

    The public base type of :class:`IMQ`, :class:`Gaussian` and :class:`Matern`: a user kernel
    subclasses it and defines ``code`` (the C++ evaluator's kernel code) and :meth:`radial`.
    Kernel objects are immutable in use: nothing in the library sets their attributes.
    """

    code: int  # base-kernel code shared with src_cpp/stein_kernel.hpp

    def __init__(self, sigma: float = 1.0):
        self.sigma = val.check_bandwidth(sigma, "sigma")

    @property
    def beta(self) -> float:
        return -0.5

    def with_sigma(self, sigma: float):
        """A copy of this kernel with another bandwidth."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.sigma = val.check_bandwidth(sigma, "sigma")
        return new

    def radial(self, xp, q):
        """Return ``(kappa(q), kappa'(q), q * kappa''(q))`` elementwise for squared distances q."""
        raise NotImplementedError

    def __call__(self, X, Y=None, M=None):
        """Base-kernel Gram matrix k(X_i, Y_j), shape (n, n')."""
        xp, dev = aa.namespace(X=X, Y=Y)
        X = val.check_points(X, xp, "X")
        Y = X if Y is None else val.check_points(Y, xp, "Y")
        if Y.shape[1] != X.shape[1]:
            raise ValueError(
                f"X and Y must have the same dimension, got {X.shape[1]} and {Y.shape[1]}"
            )
        whiten = Whitening(M, X.shape[1], xp, dev)
        U, V = whiten.points(X), whiten.points(Y)
        return self.radial(xp, squared_distances(xp, U, V))[0]

    def __repr__(self):
        return f"{type(self).__name__}(sigma={self.sigma:.6g})"

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted(self.__dict__.items()))))


class IMQ(RadialKernel):
    """Inverse multiquadric kernel ``(1 + r^2 / sigma^2)^beta``, ``beta`` in (-1, 0) (Ex. B.2)."""

    code = 0

    def __init__(self, sigma: float = 1.0, beta: float = -0.5):
        super().__init__(sigma)
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
            raise TypeError(f"beta must be a real number, got {type(beta).__name__}")
        beta = float(beta)
        if not (-1.0 < beta < 0.0):
            raise ValueError(
                f"beta must lie in (-1, 0) for a characteristic IMQ kernel, got {beta}"
            )
        self._beta = beta

    @property
    def beta(self) -> float:
        return self._beta

    def radial(self, xp, q):
        # in z = q / sigma^2: q kappa'' = beta (beta - 1) / s2 * (z ib) * kappa * ib, where
        # z ib = z / (1 + z) is formed as 1 - ib for large z, so a q / s2 that overflows
        # gives kappa = kappa' = q kappa'' = 0 (their limits), never inf * 0 = NaN
        # (src_cpp/radial.inc does the same)
        s2 = self.sigma**2
        beta = self._beta
        z = q / s2
        ib = 1.0 / (1.0 + z)
        k0 = xp.sqrt(ib) if beta == -0.5 else ib ** (-beta)
        k1 = (beta / s2) * k0 * ib
        zib = xp.where(z < 1.0, z * xp.where(z < 1.0, ib, 0.0), 1.0 - ib)
        return k0, k1, (beta * (beta - 1.0) / s2) * zib * k0 * ib

    def __repr__(self):
        return f"IMQ(sigma={self.sigma:.6g}, beta={self._beta:.6g})"


class Gaussian(RadialKernel):
    """Gaussian kernel ``exp(-r^2 / (2 sigma^2))`` (Ex. B.1)."""

    code = 1

    def radial(self, xp, q):
        s2 = self.sigma**2
        h = q / (2.0 * s2)
        k0 = xp.exp(-h)
        # q kappa'' = h kappa / (2 s2); h kappa -> 0 where h overflows (not inf * 0)
        hk = xp.where(k0 > 0.0, xp.where(k0 > 0.0, h, 0.0) * k0, 0.0)
        return k0, -k0 / (2.0 * s2), hk / (2.0 * s2)


class Matern(RadialKernel):
    """Matern kernel with smoothness ``nu`` in {1.5, 2.5}, radial in the M-norm.

    Both are twice differentiable at the diagonal, as the Stein kernel needs.
    """

    def __init__(self, sigma: float = 1.0, nu: float = 2.5):
        super().__init__(sigma)
        if isinstance(nu, bool) or not isinstance(nu, numbers.Real) or nu not in (1.5, 2.5):
            raise ValueError(
                f"nu must be 1.5 or 2.5 (the Stein kernel needs two derivatives), got {nu}"
            )
        self.nu = float(nu)

    @property
    def code(self) -> int:
        return 2 if self.nu == 1.5 else 3

    def radial(self, xp, q):
        # in t = a r (a = sqrt(2 nu) / sigma); polynomials in t times e^{-t} are set to their
        # limit 0 where e^{-t} underflows, so an overflowing t never gives inf * 0 = NaN
        a = math.sqrt(3.0 if self.nu == 1.5 else 5.0) / self.sigma
        t = a * xp.sqrt(q)
        e = xp.exp(-t)
        t = xp.where(e > 0.0, t, 0.0)
        if self.nu == 1.5:
            return (1.0 + t) * e, (-0.5 * a * a) * e, (0.25 * a * a) * t * e
        k0 = (1.0 + t + t * t / 3.0) * e
        return k0, (-(a * a) / 6.0) * (1.0 + t) * e, (a * a / 12.0) * (t * t) * e

    def __repr__(self):
        return f"Matern(sigma={self.sigma:.6g}, nu={self.nu})"


#: The base kernels the compiled backends evaluate (by their ``code``).
COMPILED_KERNELS = (IMQ, Gaussian, Matern)


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


# Private spellings kept for the engine part of this module (KernelMatrix,
# centred_kernel_matrix); use the public names.


def median_bandwidth(
    X,
    M=None,
    max_points: int = 1000,
    seed: int = 0,
    *,
    check_input: bool = True,
    n_threads: int | None = None,
) -> float:
    """Median pairwise M-distance among at most ``max_points`` standard-thinned rows (Sec. 5).

    Standard thinning keeps every ceil(n / max_points)-th row, as the paper does; it is
    deterministic, so ``seed`` does not change the result (it is accepted for API stability).
    The median is ``numpy.median`` of the m (m - 1) / 2 distances of the pairs i < j of the kept
    rows (the mean of the two middle values when their number is even).
    O(max_points^2 d).

    NumPy points are evaluated in C++ on a team of ``n_threads`` (default: the usable cores;
    src_cpp/pairwise.hpp), with the distances summed coordinate by coordinate exactly as
    :func:`squared_distances` sums them, so the value is the same bit for bit as the array-API
    evaluation other namespaces use (which stays on their device until the final median), and
    does not depend on ``n_threads``.

    Raises
    ------
    ValueError
        If every kept point is the same (the median distance is zero).
    """
    xp, dev = aa.namespace(X=X)
    if check_input:  # False: X is trusted (float64, finite, 2-D), as compress passes it
        X = val.check_points(X, xp, "X")
        max_points = val.check_int(max_points, "max_points", lo=2)
    return _median_bandwidth(X, M, max_points, xp, dev, effective_n_threads(n_threads))


def _median_bandwidth(X, M, max_points: int, xp, dev, n_threads: int = 1) -> float:
    """:func:`median_bandwidth` on validated points (X float64, finite)."""
    n = X.shape[0]
    step = max(1, math.ceil(n / max_points))
    Xs = X[::step, ...]
    U = Whitening(M, X.shape[1], xp, dev).points(Xs)
    m = U.shape[0]
    if m < 2:
        raise ValueError(
            "X: the median bandwidth needs at least two points; give the kernel an explicit sigma"
        )
    if aa.is_numpy(xp):
        Uh = np.ascontiguousarray(aa.to_host(U), dtype=np.float64)
        med = float(_core.median_pairwise_distance(Uh, n_threads))
    else:
        med = _median_pairwise_distance_xp(U, xp)
    if not med > 0:
        raise ValueError(
            "the median pairwise distance of X is zero (the points are (nearly) all equal); "
            "give the kernel an explicit sigma"
        )
    return med


def _median_pairwise_distance_xp(U, xp) -> float:
    """``numpy.median`` of the pairwise distances of the rows of U, in U's namespace: the
    (m, m) squared distances on U's device, the median of the upper triangle on the host.
    The definition the C++ evaluation (src_cpp/pairwise.hpp) reproduces."""
    m = U.shape[0]
    D = aa.to_host(xp.sqrt(squared_distances(xp, U, U)))
    return float(np.median(D[np.triu_indices(m, k=1)]))


class SteinKernel:
    """Stein kernel k_p of a radial base kernel with preconditioner M (Def. 1, Prop. B.5).

    Parameters
    ----------
    base : RadialKernel (IMQ, Gaussian or Matern), optional
        Base kernel. ``None``: IMQ(beta=-1/2) with the median M-distance bandwidth (Sec. 5) of
        the points of each call, resolved per call into a new kernel (:meth:`resolve`); the
        object itself is never changed, so one ``SteinKernel()`` used on two datasets gives
        each its own bandwidth, and threads may share it.
    M : (d, d) or (d,) array, a positive number, "scale", or None
        Symmetric positive definite preconditioner; ``None`` is the identity. ``"scale"``: the
        diagonal of per-coordinate variances of the points the kernel is resolved on
        (:meth:`resolve`), i.e. each coordinate standardised by its standard deviation, as
        ``stein_thinning.thin`` does by default. The kernel is then scale-free: multiplying a
        coordinate of X by c (and so dividing its scores by c) leaves every k_p entry, and so
        every selection, unchanged. A coordinate with zero variance keeps scale 1. This is the
        kernel :func:`stein_coreset.compress` uses when it is given none.

    Notes
    -----
    Cost: O(n d^2 + d^3) set-up, then O(d) per entry (App. I.1); ``"scale"`` adds O(n d).
    """

    def __init__(self, base: RadialKernel | None = None, M=None):
        if base is not None and not isinstance(base, RadialKernel):
            raise TypeError(f"base must be IMQ, Gaussian or Matern, got {type(base).__name__}")
        if isinstance(M, str) and M != "scale":
            raise TypeError(f"M must be an array, a number, 'scale' or None, got {M!r}")
        self.base = base
        self.M = M

    def __repr__(self):
        if self.M is None:
            m = "I"
        elif isinstance(self.M, str):
            m = repr(self.M)
        else:
            m = "given"
        return f"SteinKernel(base={self.base!r}, M={m})"

    @property
    def resolved(self) -> bool:
        """Whether the base and M are fixed (no per-call bandwidth or scale left to compute)."""
        return self.base is not None and not isinstance(self.M, str)

    def resolve(self, X, *, check_input: bool = True, n_threads=None) -> SteinKernel:
        """This kernel fixed for the points X: itself when nothing is left to resolve, else a
        new kernel with ``M = "scale"`` replaced by the (d,) per-coordinate variances of X and
        a missing base by ``IMQ(sigma=median_bandwidth(X, M))``. O(n d + min(n, 1000)^2 d).

        ``check_input=False`` trusts X (float64, finite, (n, d)). ``n_threads``: the team of
        the median's C++ evaluation (default: the usable cores); the value does not depend on it.
        """
        if self.resolved:
            return self
        xp, dev = aa.namespace(X=X)
        if check_input:
            X = val.check_points(X, xp, "X")
        M = self.M
        if isinstance(M, str):  # "scale": the per-coordinate variances of X
            M = aa.to_host(xp.var(X, axis=0))
            M = np.where(M > 0, M, 1.0)
        base = self.base
        if base is None:
            sigma = _median_bandwidth(X, M, 1000, xp, dev, effective_n_threads(n_threads))
            base = IMQ(sigma=sigma)
        return SteinKernel(base, M)

    def bind(
        self, X, S, *, nan_ok: bool = False, n_threads=None, check_input: bool = True
    ) -> KernelMatrix:
        """The implicit Stein-kernel matrix on the points X with scores S.

        ``n_threads``: team size of the C++ evaluations on this matrix (default: usable cores).
        ``check_input=False`` trusts X and S (float64, finite, one shape, one namespace): the
        path :func:`stein_coreset.compress` takes after validating them once. With
        ``base=None`` the median bandwidth of X is used, with ``M="scale"`` the variances of X
        (the object is not changed).
        """
        if check_input:
            X, S = aa.as_arrays(X=X, S=S)
            xp, dev = aa.namespace(X=X, S=S)
            X = val.check_points(X, xp, "X")
            S = val.check_scores(S, X, xp, "S")
        else:
            xp, dev = aa.namespace(X=X)
        k = self.resolve(X, check_input=False, n_threads=n_threads)
        wh = Whitening(k.M, X.shape[1], xp, dev)
        return KernelMatrix(k.base, wh.points(X), wh.scores(S), n_threads=n_threads)

    def matrix(self, X, S, Y=None, T=None):
        """Gram matrix k_p(X_i, Y_j), shape (n, n'); ``S``, ``T`` are the scores at X, Y
        (a bandwidth or scale left to resolve is fixed on X)."""
        if (Y is None) != (T is None):
            raise ValueError("give both Y and its scores T, or neither")
        X, S, Y, T = aa.as_arrays(X=X, S=S, Y=Y, T=T)
        xp, _ = aa.namespace(X=X, S=S)
        X = val.check_points(X, xp, "X")
        k = self.resolve(X, check_input=False)
        K = k.bind(X, S)
        if Y is None:
            return K.dense()
        xp, _ = aa.namespace(X=X, S=S, Y=Y, T=T)
        Y = val.check_points(Y, xp, "Y")
        if Y.shape[1] != X.shape[1]:
            raise ValueError(
                f"X and Y must have the same dimension, got {X.shape[1]} and {Y.shape[1]}"
            )
        T = val.check_scores(T, Y, xp, "T")
        wh = Whitening(k.M, X.shape[1], xp, aa.device_of(X))
        return K.cross(wh.points(Y), wh.scores(T))

    def diag(self, X, S):
        """Diagonal k_p(x_i, x_i) = ||L^T s_i||^2 kappa(0) - 2 d kappa'(0), shape (n,)."""
        return self.bind(X, S).diag()

    def __call__(self, X, S, Y=None, T=None):
        return self.matrix(X, S, Y, T)


#: The engine's backends (see :class:`KernelMatrix`).
BACKENDS = ("cpu", "cuda", "xp")
_BACKEND_ALIASES = {"cpp": "cpu", "array_api": "xp"}


def is_compiled_kernel(base) -> bool:
    """Whether the compiled backends (C++ and CUDA) know this base kernel: exactly
    :class:`IMQ`, :class:`Gaussian` or :class:`Matern`, not a subclass (whose ``radial`` may
    differ from the compiled formula its ``code`` names)."""
    return type(base) in COMPILED_KERNELS


def resolve_backend(backend, xp, base) -> str:
    """The backend a kernel matrix on arrays of namespace ``xp`` with base kernel ``base``
    uses (one of :data:`BACKENDS`); ``backend`` is "auto", one of BACKENDS or an alias."""
    if backend == "auto":
        if not is_compiled_kernel(base):
            return "xp"
        if aa.is_numpy(xp):
            return "cpu"
        return "cuda" if aa.is_cupy(xp) else "xp"
    name = _BACKEND_ALIASES.get(backend, backend)
    if name not in BACKENDS:
        raise ValueError(
            f"backend must be 'auto' or one of {', '.join(map(repr, BACKENDS))}, got {backend!r}"
        )
    if name != "xp" and not is_compiled_kernel(base):
        raise ValueError(
            f"backend {name!r} cannot evaluate {type(base).__name__}: the compiled backends know "
            f"only {', '.join(c.__name__ for c in COMPILED_KERNELS)}; use backend='xp'"
        )
    if name == "cuda" and not aa.is_cupy(xp):
        raise ValueError("backend 'cuda' needs CuPy arrays")
    return name


class KernelMatrix:
    """The n x n matrix of a P-mean-zero kernel k_P on fixed points, never formed in full.

    Built by :meth:`SteinKernel.bind` (Stein kernel) or :func:`centred_kernel_matrix`
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

    def block(self, rows, cols=None):
        """Block k_P(x_rows, x_cols) in the array namespace, shape (len(rows), len(cols) or n)."""
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
        """The full (n, n) matrix; O(n^2) memory, for small n and tests."""
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
        """w^T K w (the squared MMD_{k_P} of the signed measure sum_i w_i delta_{x_i} to P)."""
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


def centred_kernel_matrix(
    base: RadialKernel, X, M=None, reference=None, n_threads=None, *, check_input: bool = True
) -> KernelMatrix:
    """Base kernel centred at an empirical distribution: the unbiased baselines' k_P.

    ``k_P(x, y) = k(x, y) - E k(x, Z) - E k(Z, y) + E k(Z, Z')`` with Z, Z' drawn from the rows of
    ``reference`` (default ``X`` itself, paper footnote 2), so
    ``MMD_{k_P}(Q, P) = MMD_k(Q, P_ref)``.
    O(n n_ref d) to form the centring vector. ``check_input=False`` trusts X and reference
    (float64 (n, d) arrays of one namespace, as :func:`~stein_coreset.compress` passes them).
    """
    xp, dev = aa.namespace(X=X, reference=reference)
    if check_input:
        X = val.check_points(X, xp, "X")
        R = X if reference is None else val.check_points(reference, xp, "reference")
        if R.shape[1] != X.shape[1]:
            raise ValueError("reference must have the dimension of X")
    else:
        R = X if reference is None else reference
    wh = Whitening(M, X.shape[1], xp, dev)
    U, V = wh.points(X), wh.points(R)
    plain = KernelMatrix(base, U, n_threads=n_threads)
    if reference is None:
        n = int(U.shape[0])
        mean = plain.matvec(xp.full((n,), 1.0 / n, dtype=xp.float64, device=dev))
    else:
        means = []
        for a, b in plain.slabs():
            means.append(xp.mean(base.radial(xp, squared_distances(xp, U[a:b, ...], V))[0], axis=1))
        mean = xp.concat(means, axis=0)
    if reference is None:
        mean_all = float(xp.mean(mean))
    else:
        ref = KernelMatrix(base, V, n_threads=n_threads)
        ones = xp.full((V.shape[0],), 1.0 / V.shape[0], dtype=xp.float64, device=dev)
        mean_all = ref.quad(ones)
    return KernelMatrix(base, U, None, mean, mean_all, n_threads=n_threads)

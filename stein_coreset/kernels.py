"""Base kernels and the Stein kernel k_p; binding one to points gives the kernel matrix.

Base kernels are radial in the M-norm, k(x, y) = kappa(||x - y||_M^2) with
||x - y||_M^2 = (x - y)^T M^{-1} (x - y). The Stein kernel (Def. 1, Prop. B.5) of a radial base is

    k_p(x, y) = kappa <s_x, M s_y> - 2 kappa' <x - y, s_x - s_y> - 4 q kappa'' - 2 d kappa',

evaluated in O(d) per entry after whitening once (App. I.1): with M = L L^T, u = L^{-1} x and
t = L^T s: q = ||u_x - u_y||^2, <s_x, M s_y> = <t_x, t_y> and
<x - y, s_x - s_y> = <u_x - u_y, t_x - t_y>.

:meth:`SteinKernel.bind` (the Stein kernel at (X, S)) and :func:`centred_kernel_matrix` (a base
kernel centred at the input, for the unbiased baselines, paper footnote 2) give the
:class:`~stein_coreset.engine.KernelMatrix` every algorithm reads k_P through; the engine
(:mod:`stein_coreset.engine`) evaluates it. The compiled backends know exactly :class:`IMQ`,
:class:`Gaussian` and :class:`Matern` (registered with
:func:`~stein_coreset.engine.compiled_kernel`).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from . import _array_api as aa
from . import _validation as val
from ._threads import effective_n_threads
from .engine import (
    KernelMatrix,
    Whitening,
    compiled_kernel,
    median_pairwise_distance,
    native,
    squared_distances,
)

__all__ = [
    "RadialKernel",
    "IMQ",
    "Gaussian",
    "Matern",
    "SteinKernel",
    "DEFAULT_KERNEL",
    "median_bandwidth",
    "centred_kernel_matrix",
]


#: (n x n') float64 arrays alive while a base kernel's Gram matrix is formed (the squared
#: distances, one coordinate's differences and the radial terms).
GRAM_PEAK_ARRAYS = 6


class RadialKernel:
    """A base kernel k(x, y) = kappa(||x - y||_M^2); subclasses give kappa and its derivatives.

    The public base type of :class:`IMQ`, :class:`Gaussian` and :class:`Matern`. A user kernel
    subclasses it and defines :meth:`radial` (and ``__init__`` for its parameters): it is then
    evaluated by the array-API reference (the engine's ``"xp"`` backend) on any namespace; the
    compiled backends ("cpu", "cuda") and the loops that run only in compiled code refuse it.
    Only the library's own classes are compiled: each names its formula in the C++ and CUDA
    code by ``code``, a value of ``engine.native.BASE_KERNEL_CODES`` (adding one:
    docs/compiled_kernels.md).
    Kernel objects are immutable in use: nothing in the library sets their attributes.
    """

    code: int  # compiled kernels only: their code in engine.native.BASE_KERNEL_CODES

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

    def dksd_radial(self, xp, q, qpos, qsafe):
        """``(kappa, kappa', kappa'')`` at q for the DKSD pass, kappa'' taken as 0 where q = 0
        (``qpos`` is ``q > 0``, ``qsafe`` is q with 1 where it is 0); src_cpp/radial.inc's
        ``dksd_radial``. This default divides :meth:`radial`'s ``q kappa''`` by q."""
        k0, k1, qk2 = self.radial(xp, q)
        return k0, k1, xp.where(qpos, qk2 / qsafe, 0.0)

    def __call__(self, X, Y=None, M=None):
        """Base-kernel Gram matrix k(X_i, Y_j), shape (n, n')."""
        xp, dev = aa.namespace(X=X, Y=Y)
        X = val.check_points(X, xp, "X")
        Y = X if Y is None else val.check_points(Y, xp, "Y")
        if Y.shape[1] != X.shape[1]:
            raise ValueError(
                f"X and Y must have the same dimension, got {X.shape[1]} and {Y.shape[1]}"
            )
        val.check_matrix(int(X.shape[0]), int(Y.shape[0]), "X" if Y is X else "X, Y",
                         f"the Gram matrix of {type(self).__name__}", like=X,
                         copies=GRAM_PEAK_ARRAYS)
        whiten = Whitening(M, X.shape[1], xp, dev)
        U, V = whiten.points(X), whiten.points(Y)
        return self.radial(xp, squared_distances(xp, U, V))[0]

    def __repr__(self):
        return f"{type(self).__name__}(sigma={self.sigma:.6g})"

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted(self.__dict__.items()))))


@compiled_kernel
class IMQ(RadialKernel):
    """Inverse multiquadric kernel ``(1 + r^2 / sigma^2)^beta``, ``beta`` in (-1, 0) (Ex. B.2).

    The paper's default base kernel: with -1 < beta < 0 its KSD detects non-convergence to P
    (Gorham & Mackey, 2017), which the Gaussian's does not guarantee.

    Parameters
    ----------
    sigma : float
        Bandwidth, > 0 (:func:`median_bandwidth` is the paper's choice, Sec. 5).
    beta : float
        Exponent in (-1, 0); -1/2 is the paper's.

    Notes
    -----
    O(d) per evaluation, O(d^2) with a full preconditioner M.

    See Also
    --------
    SteinKernel : the Stein kernel built on it.
    Gaussian, Matern : the other compiled base kernels.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = np.random.default_rng(0).standard_normal((200, 2))     # a sample of N(0, I)
    >>> kern = sc.IMQ(sigma=1.0)
    >>> kern
    IMQ(sigma=1, beta=-0.5)
    >>> round(sc.ksd(X, -X, kernel=kern), 4), round(sc.ksd(X + 1, -(X + 1), kernel=kern), 4)
    (0.1243, 1.0129)
    """

    code = native.BASE_KERNEL_CODES["IMQ"]

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

    def dksd_radial(self, xp, q, qpos, qsafe):
        if self._beta != -0.5 or type(self).radial is not IMQ.radial:
            # a subclass with its own radial is evaluated by its formula, never as IMQ
            return super().dksd_radial(xp, q, qpos, qsafe)
        # radial.inc's dksd_imq_half, in its order of operations: kappa = bb^(-1/2) with
        # bb = 1 + q / s2, kappa' = (beta / s2) kappa^3, kappa'' = beta (beta - 1) / s2^2
        # kappa^5 (q kappa'' / q in one step, half the passes of the default); where q / s2
        # overflows every term is 0
        is2 = 1.0 / self.sigma**2
        k0 = 1.0 / xp.sqrt(1.0 + q * is2)
        ib = k0 * k0
        k1 = (-0.5 * is2) * k0 * ib
        return k0, k1, xp.where(qpos, (0.75 * is2 * is2) * k0 * ib * ib, 0.0)

    def __repr__(self):
        return f"IMQ(sigma={self.sigma:.6g}, beta={self._beta:.6g})"


@compiled_kernel
class Gaussian(RadialKernel):
    """Gaussian kernel ``exp(-r^2 / (2 sigma^2))`` (Ex. B.1).

    Parameters
    ----------
    sigma : float
        Bandwidth, > 0.

    Notes
    -----
    O(d) per evaluation, O(d^2) with a full preconditioner M. Its KSD can miss
    non-convergence to P (Gorham & Mackey, 2017); :class:`IMQ` is the safer default.

    See Also
    --------
    IMQ : the paper's default base kernel.
    mmd : a two-sample distance with a base kernel.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = np.random.default_rng(0).standard_normal((200, 2))
    >>> round(sc.ksd(X, -X, kernel=sc.Gaussian(1.0)), 4)
    0.1152
    >>> round(sc.mmd(X, X + 0.5, kernel=sc.Gaussian(1.0)), 4)
    0.2299
    """

    code = native.BASE_KERNEL_CODES["Gaussian"]

    def radial(self, xp, q):
        s2 = self.sigma**2
        h = q / (2.0 * s2)
        k0 = xp.exp(-h)
        # q kappa'' = h kappa / (2 s2); h kappa -> 0 where h overflows (not inf * 0)
        hk = xp.where(k0 > 0.0, xp.where(k0 > 0.0, h, 0.0) * k0, 0.0)
        return k0, -k0 / (2.0 * s2), hk / (2.0 * s2)


@compiled_kernel
class Matern(RadialKernel):
    """Matern kernel with smoothness ``nu`` in {1.5, 2.5}, radial in the M-norm.

    Both are twice differentiable at the diagonal, as the Stein kernel needs.

    Parameters
    ----------
    sigma : float
        Bandwidth, > 0.
    nu : {1.5, 2.5}
        Smoothness.

    Notes
    -----
    O(d) per evaluation, O(d^2) with a full preconditioner M.

    See Also
    --------
    IMQ : the paper's default base kernel.
    SteinKernel : the Stein kernel built on it.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = np.random.default_rng(0).standard_normal((200, 2))
    >>> kern = sc.Matern(sigma=1.0, nu=1.5)
    >>> kern
    Matern(sigma=1, nu=1.5)
    >>> round(sc.ksd(X, -X, kernel=kern), 4)
    0.1855
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
        return native.BASE_KERNEL_CODES["Matern15" if self.nu == 1.5 else "Matern25"]

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

    The median is ``numpy.median`` of the m (m - 1) / 2 distances of the pairs i < j of the kept
    rows (the mean of the two middle values when their number is even).

    Parameters
    ----------
    X : (n, d) array
        The points.
    M : None, (d,) or (d, d) array, or "scale"
        None (identity, the Euclidean distance), a diagonal or SPD matrix, or ``"scale"``: the
        per-coordinate variances of X, the preconditioner of ``DEFAULT_KERNEL`` (so
        ``median_bandwidth(X, "scale")`` is its bandwidth on X).
    max_points : int
        Standard thinning keeps every ceil(n / max_points)-th row, as the paper does.
    seed : int
        Accepted for API stability; the thinning is deterministic, so it does not change the
        result.
    check_input : bool
        Validate X (default); ``False`` trusts a float64, finite (n, d) array.
    n_threads : int, optional
        Threads of the compiled evaluation (default: the usable cores); the value does not
        depend on it.

    Returns
    -------
    float

    Notes
    -----
    O(max_points^2 d) time.

    See Also
    --------
    IMQ : the base kernel whose bandwidth this sets.
    SteinKernel : ``SteinKernel()`` (no base) uses this bandwidth on each call's points.

    Raises
    ------
    ValueError
        If every kept point is the same (the median distance is zero).

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = np.random.default_rng(0).standard_normal((500, 2))
    >>> round(sc.median_bandwidth(X), 4)
    1.6144
    >>> round(sc.median_bandwidth(10.0 * X, M="scale"), 4)  # in units of each coordinate's sd
    1.6538
    """
    xp, dev = aa.namespace(X=X)
    if check_input:  # False: X is trusted (float64, finite, 2-D), as compress passes it
        X = val.check_points(X, xp, "X")
        max_points = val.check_int(max_points, "max_points", lo=2)
    if isinstance(M, str):
        if M != "scale":
            raise ValueError(f"M must be an array, a number, 'scale' or None, got {M!r}")
        M = _scale_preconditioner(X, xp)
    return _median_bandwidth(X, M, max_points, xp, dev, effective_n_threads(n_threads))


def _scale_preconditioner(X, xp) -> np.ndarray:
    """M = "scale" on X: the (d,) host per-coordinate variances (1 where a coordinate is
    constant)."""
    with np.errstate(over="ignore", invalid="ignore"):
        M = aa.to_host(xp.var(X, axis=0))
    if not np.all(np.isfinite(M)):  # before: "M has NaN or inf entries", an M never given
        j = int(np.flatnonzero(~np.isfinite(M))[0])
        raise ValueError(
            f"X: the variance of its coordinate {j} overflows (|X| up to "
            f"{float(np.max(np.abs(aa.to_host(X[:, j])))):.3g}), so the default kernel's "
            "preconditioner M = 'scale' cannot be formed; rescale X (and S by the inverse "
            "factor), or pass a kernel with an explicit M"
        )
    return np.where(M > 0, M, 1.0)


def _median_bandwidth(X, M, max_points: int, xp, dev, n_threads: int = 1) -> float:
    """:func:`median_bandwidth` on validated points (X float64, finite)."""
    n = X.shape[0]
    step = max(1, math.ceil(n / max_points))
    Xs = X[::step, ...]
    U = Whitening(M, X.shape[1], xp, dev).points(Xs)
    if U.shape[0] < 2:
        raise ValueError(
            "X: the median bandwidth needs at least two points; give the kernel an explicit sigma"
        )
    med = median_pairwise_distance(U, n_threads)
    if not med > 0:
        raise ValueError(
            "the median pairwise distance of X is zero (the points are (nearly) all equal); "
            "give the kernel an explicit sigma"
        )
    return med


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
        (:meth:`resolve`), i.e. each coordinate standardised by its standard deviation
        (``stein_thinning.thin``'s default scales by the median absolute deviation instead).
        The kernel is then scale-free: multiplying a
        coordinate of X by c (and so dividing its scores by c) leaves every k_p entry, and so
        every selection, unchanged. A coordinate with zero variance keeps scale 1. This is the
        kernel :func:`stein_coreset.compress` uses when it is given none.

    Notes
    -----
    Cost: O(n d^2 + d^3) set-up, then O(d) per entry (App. I.1); ``"scale"`` adds O(n d).

    See Also
    --------
    ksd : the kernel Stein discrepancy of a weighted sample.
    median_bandwidth : the default bandwidth.
    compress : takes it as ``kernel=``.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = np.random.default_rng(0).standard_normal((500, 2))
    >>> kp = sc.SteinKernel(sc.IMQ(sigma=1.0))
    >>> K = kp.matrix(X[:3], -X[:3])              # scores of N(0, I) at the points
    >>> K.shape, bool(np.allclose(K, K.T))
    ((3, 3), True)
    >>> bool(np.allclose(np.diag(K), kp.diag(X[:3], -X[:3])))
    True
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

        ``check_input=False`` trusts X (float64, finite, (n, d)). ``n_threads``: the threads of
        the median's evaluation (default: the usable cores); the value does not depend on it.
        """
        if self.resolved:
            return self
        xp, dev = aa.namespace(X=X)
        if check_input:
            X = val.check_points(X, xp, "X")
        M = self.M
        if isinstance(M, str):
            M = _scale_preconditioner(X, xp)
        base = self.base
        if base is None:
            sigma = _median_bandwidth(X, M, 1000, xp, dev, effective_n_threads(n_threads))
            base = IMQ(sigma=sigma)
        return SteinKernel(base, M)

    def bind(
        self, X, S, *, nan_ok: bool = False, n_threads=None, check_input: bool = True
    ) -> KernelMatrix:
        """The implicit Stein-kernel matrix on the points X with scores S.

        ``n_threads``: threads of the compiled evaluations on this matrix (default: the usable
        cores). The matrix is what the functions of :mod:`stein_coreset.algorithms` take.
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
        n = int(X.shape[0])
        if Y is None:  # refused before the bandwidth is resolved (the dense matrix checks too)
            val.check_matrix(n, n, "X", f"the dense Stein kernel matrix of n = {n} points",
                             like=X)
            return self.resolve(X, check_input=False).bind(X, S).dense()
        xp, _ = aa.namespace(X=X, S=S, Y=Y, T=T)
        Y = val.check_points(Y, xp, "Y")
        if Y.shape[1] != X.shape[1]:
            raise ValueError(
                f"X and Y must have the same dimension, got {X.shape[1]} and {Y.shape[1]}"
            )
        T = val.check_scores(T, Y, xp, "T")
        val.check_matrix(n, int(Y.shape[0]), "X, Y", "the Stein kernel matrix k_p(X, Y)",
                         like=X, copies=8)  # formed by the array-API reference (q, the terms)
        k = self.resolve(X, check_input=False)
        K = k.bind(X, S)
        wh = Whitening(k.M, X.shape[1], xp, aa.device_of(X))
        return K.cross(wh.points(Y), wh.scores(T))

    def diag(self, X, S):
        """Diagonal k_p(x_i, x_i) = ||L^T s_i||^2 kappa(0) - 2 d kappa'(0), shape (n,)."""
        return self.bind(X, S).diag()

    def __call__(self, X, S, Y=None, T=None):
        return self.matrix(X, S, Y, T)


#: The Stein kernel used when none is given (``compress``, ``ksd``): IMQ(beta=-1/2) at the
#: median bandwidth, with the scale-free preconditioner M = diag(per-coordinate variance of X),
#: both resolved on the X of the call.
DEFAULT_KERNEL = SteinKernel(M="scale")


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

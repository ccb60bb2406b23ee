"""Base kernels, radial in the M-norm: k(x, y) = kappa(||x - y||_M^2) with
||x - y||_M^2 = (x - y)^T M^{-1} (x - y). :class:`IMQ`, :class:`Gaussian` and :class:`Matern`
are the ones the compiled backends know (registered with
:func:`~stein_coreset.engine.compiled_kernel`); a subclass runs on the array-API reference."""

from __future__ import annotations

import math
import numbers

from .. import _array_api as aa
from .. import _validation as val
from ..engine import BASE_KERNEL_CODES, Whitening, compiled_kernel, squared_distances

__all__ = ["RadialKernel", "IMQ", "Gaussian", "Matern", "GRAM_PEAK_ARRAYS"]


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
    code by ``code``, a value of ``engine.BASE_KERNEL_CODES`` (adding one:
    docs/compiled_kernels.md).
    Kernel objects are immutable in use: nothing in the library sets their attributes. A
    parameter set by the user after construction (``k.sigma = 2.0``) is validated as the
    constructor validates it (before: ``k.sigma = inf`` gave a KSD of 0.0 and ``k.sigma = 0`` a
    ZeroDivisionError deep in the evaluation).
    """

    code: int  # compiled kernels only: their code in engine.BASE_KERNEL_CODES

    def __init__(self, sigma: float = 1.0):
        self.sigma = sigma

    @property
    def sigma(self) -> float:
        """The bandwidth, in [1e-75, 1e75] (checked when set: beyond it sigma^4 under- or
        overflows)."""
        return self._sigma

    @sigma.setter
    def sigma(self, value) -> None:
        self._sigma = val.check_bandwidth(value, "sigma")

    @property
    def beta(self) -> float:
        return -0.5

    def with_sigma(self, sigma: float):
        """A copy of this kernel with another bandwidth."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.sigma = sigma
        return new

    def radial(self, xp, q):
        """Return ``(kappa(q), kappa'(q), q * kappa''(q))`` elementwise for squared distances q."""
        raise NotImplementedError

    def dksd_radial(self, xp, q, qpos, qsafe):
        """``(kappa, kappa', kappa'')`` at q for the DKSD pass, kappa'' taken as 0 where q = 0
        (``qpos`` is ``q > 0``, ``qsafe`` is q with 1 where it is 0); engine/shared/radial.inc's
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

    code = BASE_KERNEL_CODES["IMQ"]

    def __init__(self, sigma: float = 1.0, beta: float = -0.5):
        super().__init__(sigma)
        self.beta = beta

    @property
    def beta(self) -> float:
        """The exponent, in (-1, 0) (checked when set)."""
        return self._beta

    @beta.setter
    def beta(self, beta) -> None:
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
            raise TypeError(f"beta must be a real number, got {type(beta).__name__}")
        beta = float(beta)
        if not (-1.0 < beta < 0.0):
            raise ValueError(
                f"beta must lie in (-1, 0) for a characteristic IMQ kernel, got {beta}"
            )
        self._beta = beta

    def radial(self, xp, q):
        # in z = q / sigma^2: q kappa'' = beta (beta - 1) / s2 * (z ib) * kappa * ib, where
        # z ib = z / (1 + z) is formed as 1 - ib for large z, so a q / s2 that overflows
        # gives kappa = kappa' = q kappa'' = 0 (their limits), never inf * 0 = NaN
        # (engine/shared/radial.inc does the same)
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
        # radial.inc's dksd_imq_half, in its order of operations: kappa = bb^(-1/2) with bb = 1 + q
        # / s2, kappa' = (beta / s2) kappa^3, kappa'' = beta (beta - 1) / s2^2 kappa^5 (q kappa'' /
        # q in one step, half the passes of the default); where q / s2 overflows every term is 0
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

    code = BASE_KERNEL_CODES["Gaussian"]

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
        self.nu = nu

    @property
    def nu(self) -> float:
        """The smoothness, 1.5 or 2.5 (checked when set)."""
        return self._nu

    @nu.setter
    def nu(self, nu) -> None:
        if isinstance(nu, bool) or not isinstance(nu, numbers.Real) or nu not in (1.5, 2.5):
            raise ValueError(
                f"nu must be 1.5 or 2.5 (the Stein kernel needs two derivatives), got {nu}"
            )
        self._nu = float(nu)

    @property
    def code(self) -> int:
        return BASE_KERNEL_CODES["Matern15" if self.nu == 1.5 else "Matern25"]

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

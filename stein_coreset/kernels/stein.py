"""The Stein kernel k_p of a radial base kernel (Def. 1, Prop. B.5), and the base kernel centred
at the input (paper footnote 2); binding either to points gives the kernel matrix."""

from __future__ import annotations

import copy
import numbers

from .. import _array_api as aa
from .. import _validation as val
from .._threads import effective_n_threads
from ..engine import KernelMatrix, Whitening, squared_distances
from .bandwidth import median_bandwidth_of, scale_preconditioner
from .radial import IMQ, RadialKernel

__all__ = ["SteinKernel", "DEFAULT_KERNEL", "centred_kernel_matrix"]


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
        self.base = base
        self.M = M

    @property
    def base(self) -> RadialKernel | None:
        """The base kernel (None: IMQ at the median bandwidth of each call); checked when set."""
        return self._base

    @base.setter
    def base(self, base) -> None:
        self._check_not_shared("base")
        if base is not None and not isinstance(base, RadialKernel):
            raise TypeError(f"base must be IMQ, Gaussian or Matern, got {type(base).__name__}")
        self._base = base

    @property
    def M(self):
        """The preconditioner (an array, a number, "scale" or None); its type is checked when
        set (a complex M is refused), its shape and definiteness where it is used."""
        return self._M

    @M.setter
    def M(self, M) -> None:
        self._check_not_shared("M")
        if isinstance(M, str) and M != "scale":
            raise TypeError(f"M must be an array, a number, 'scale' or None, got {M!r}")
        val.check_real_parameter(M, "M")
        self._M = M

    def _check_not_shared(self, name: str) -> None:
        if getattr(self, "_shared", False):
            raise AttributeError(
                f"DEFAULT_KERNEL.{name} cannot be set: it is the kernel of every call given "
                "none; pass your own kernel=SteinKernel(...) instead"
            )

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
        """This kernel fixed for the points X: a :meth:`snapshot` of itself when nothing is
        left to resolve, else a new kernel with ``M = "scale"`` replaced by the (d,)
        per-coordinate variances of X and a missing base by
        ``IMQ(sigma=median_bandwidth(X, M))``. O(n d + min(n, 1000)^2 d).

        ``check_input=False`` trusts X (float64, finite, (n, d)). ``n_threads``: the threads of
        the median's evaluation (default: the usable cores); the value does not depend on it.
        """
        if self.resolved:
            return self.snapshot()
        xp, dev = aa.namespace(X=X)
        if check_input:
            X = val.check_points(X, xp, "X")
        M = self.M
        if isinstance(M, str):
            M = scale_preconditioner(X, xp)
        base = self.base
        if base is None:
            sigma = median_bandwidth_of(X, M, 1000, xp, dev, effective_n_threads(n_threads),
                                        for_kernel=True)
            base = IMQ(sigma=sigma)
        return SteinKernel(base, M).snapshot()

    def snapshot(self) -> SteinKernel:
        """A copy that later changes of this kernel's base (``k.base.sigma = ...``) or of an M
        array it was given do not reach: what :meth:`resolve` returns, so a result's recorded
        kernel (``res.info["stein_kernel"]``) stays the one that computed it."""
        M = self.M
        if M is not None and not isinstance(M, (str, numbers.Number)):
            M = aa.copy_array(M)
        return SteinKernel(None if self.base is None else copy.copy(self.base), M)

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
DEFAULT_KERNEL._shared = True  # read-only: a change would reach every later call


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

"""Matrix kernels of the DKSD (Barp et al., 2019, Sec. 2.1) and the canonical plan the pair passes
evaluate: K = diag(lambda_r k_r) in whitened coordinates, with an optional factor K = C C^T k."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _array_api as aa
from ..engine import Whitening
from ..kernels import IMQ, RadialKernel, SteinKernel, median_bandwidth

__all__ = ["SeparableKernel", "DiagonalKernel", "KernelPlan", "kernel_plan"]


class SeparableKernel:
    """Matrix kernel K(x, y) = B k(x, y) (Sec. 2.1 (ii)); B symmetric positive definite.

    Parameters
    ----------
    base : RadialKernel, optional
        The scalar kernel k; None: IMQ with the median bandwidth of the data.
    B : (d, d) array, optional
        Symmetric positive definite; None: the identity.

    See Also
    --------
    DiagonalKernel : one scalar kernel per coordinate.
    loss : ``discrepancy="dksd"`` takes either.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=2)
    >>> X = model.sample(200, [0.5, -0.5, 1.0], np.random.default_rng(0))
    >>> kern = est.SeparableKernel(sc.IMQ(1.0), B=np.diag([1.0, 2.0]))
    >>> round(est.loss(model, [0.5, -0.5, 1.0], X, discrepancy="dksd", kernel=kern), 4)
    -0.0085
    """

    def __init__(self, base: RadialKernel | None = None, B=None):
        if base is not None and not isinstance(base, RadialKernel):
            raise TypeError(f"base must be IMQ, Gaussian or Matern, got {type(base).__name__}")
        self.base = base
        self.B = None if B is None else np.asarray(B, dtype=np.float64)

    def __repr__(self):
        return f"SeparableKernel(base={self.base!r}, B={'I' if self.B is None else 'given'})"


class DiagonalKernel:
    """Matrix kernel K = diag(lambda_1 k_1, ..., lambda_d k_d) (Sec. 2.1 (i)), lambda_i > 0.

    Parameters
    ----------
    bases : RadialKernel or sequence of d of them
        One base kernel shared by every coordinate, or one per coordinate.
    lambdas : (d,) array-like, optional
        Positive weights of the coordinates (default all 1).

    See Also
    --------
    SeparableKernel : one scalar kernel times a matrix.
    loss : ``discrepancy="dksd"`` takes either.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=2)
    >>> X = model.sample(200, [0.5, -0.5, 1.0], np.random.default_rng(0))
    >>> kern = est.DiagonalKernel([sc.IMQ(1.0), sc.Gaussian(1.0)], lambdas=[1.0, 0.5])
    >>> round(est.loss(model, [0.5, -0.5, 1.0], X, discrepancy="dksd", kernel=kern), 4)
    -0.0025
    """

    def __init__(self, bases, lambdas=None):
        seq = list(bases) if isinstance(bases, (list, tuple)) else [bases]
        for b in seq:
            if not isinstance(b, RadialKernel):
                raise TypeError(f"bases must be IMQ, Gaussian or Matern, got {type(b).__name__}")
        self.bases = seq
        self.lambdas = None if lambdas is None else np.asarray(lambdas, dtype=np.float64)
        if self.lambdas is not None and (
            self.lambdas.ndim != 1 or not np.all(np.isfinite(self.lambdas))
            or np.any(self.lambdas <= 0)
        ):
            raise ValueError(f"lambdas must be a vector of positive numbers, got {lambdas}")

    def __repr__(self):
        return f"DiagonalKernel(bases={self.bases!r}, lambdas={self.lambdas})"


@dataclass
class KernelPlan:
    """A matrix kernel in canonical form: per-component radial kernels, a factor C, whitening."""

    comps: list  # per component r: (base kernel, lambda_r)
    C: np.ndarray | None  # K = C C^T k
    wh: Whitening
    full: bool  # C or M force a full diffusion matrix


def kernel_plan(kernel, X, xp, dev) -> KernelPlan:
    """The :class:`KernelPlan` of a loss's ``kernel`` argument on X (median bandwidth when
    the base kernel is not given); ValueError / TypeError name the kernel."""
    d = int(X.shape[1])
    M, C = None, None
    if kernel is None:
        base = IMQ(sigma=median_bandwidth(X))
        comps = [(base, 1.0)] * d
    elif isinstance(kernel, RadialKernel):
        comps = [(kernel, 1.0)] * d
    elif isinstance(kernel, SteinKernel):
        # the preconditioned Stein kernel of kernels.py (Prop. B.3): K = M k with k radial in
        # the M-norm, so that m = I reproduces SteinKernel(base, M) exactly
        base = kernel.resolve(X).base
        M = kernel.M
        comps = [(base, 1.0)] * d
        if M is not None:
            C = Whitening(M, d, xp, dev).L
            C = aa.to_host(C)
    elif isinstance(kernel, SeparableKernel):
        base = kernel.base or IMQ(sigma=median_bandwidth(X))
        comps = [(base, 1.0)] * d
        if kernel.B is not None:
            B = kernel.B
            if B.shape != (d, d):
                raise ValueError(f"kernel B must have shape ({d}, {d}), got {B.shape}")
            if not np.allclose(B, B.T, rtol=1e-10, atol=1e-12 * np.abs(B).max()):
                raise ValueError("kernel B must be symmetric positive definite; not symmetric")
            try:
                C = np.linalg.cholesky(B)
            except np.linalg.LinAlgError:
                raise ValueError("kernel B must be symmetric positive definite") from None
            if np.count_nonzero(B - np.diag(np.diag(B))) == 0:
                comps = [(base, float(B[r, r])) for r in range(d)]
                C = None
    elif isinstance(kernel, DiagonalKernel):
        bases = kernel.bases * d if len(kernel.bases) == 1 else kernel.bases
        if len(bases) != d:
            raise ValueError(f"DiagonalKernel needs 1 or d = {d} base kernels, got {len(bases)}")
        lam = np.ones(d) if kernel.lambdas is None else kernel.lambdas
        if lam.size != d:
            raise ValueError(f"DiagonalKernel needs d = {d} lambdas, got {lam.size}")
        comps = [(bases[r], float(lam[r])) for r in range(d)]
    else:
        raise TypeError(
            "kernel must be a base kernel (IMQ, Gaussian, Matern), a SteinKernel, a "
            f"SeparableKernel or a DiagonalKernel, got {type(kernel).__name__}"
        )
    wh = Whitening(M, d, xp, dev)
    return KernelPlan(comps, C, wh, full=(C is not None or M is not None))


"""Minimum Stein discrepancy losses: the public ``loss``, ``loss_and_grad`` and ``information``.

DKSD / KSD (U-statistics, Barp et al., 2019, Eq. 7) are evaluated by
:mod:`stein_coreset.estimators.dksd` (one pair pass per engine backend, docs/engine.md) and, for
``"ksd"`` values, by :class:`~stein_coreset.engine.KernelMatrix` itself; SM, DSM and NNSM by
:mod:`stein_coreset.estimators.score_matching`. The matrix kernels live in
:mod:`~stein_coreset.estimators.matrix_kernels`, the diffusion matrices in
:mod:`~stein_coreset.estimators.diffusion`.

:func:`evaluate`, :func:`evaluate_with_grad`, :func:`information_tensor` and :func:`validate`
are the same computations on validated arguments, for :func:`stein_coreset.estimators.fit`.
"""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from .._threads import effective_n_threads
from ..engine import check_backend
from . import derivatives as _deriv
from . import dksd as _dksd
from . import score_matching as _sm
from .diffusion import Diffusion, as_diffusion, nn_diffusion
from .domains import check_support, check_theta
from .matrix_kernels import DiagonalKernel, SeparableKernel
from .pointwise import mT

__all__ = [
    "SeparableKernel",
    "DiagonalKernel",
    "Diffusion",
    "loss",
    "loss_and_grad",
    "information",
    "DISCREPANCIES",
    "KERNEL_BASED",
    "BACKENDS",
    "evaluate",
    "evaluate_with_grad",
    "information_tensor",
    "fd_grad",
    "validate",
    "check_model_dimension",
]

DISCREPANCIES = ("ksd", "dksd", "sm", "dsm", "nnsm")
KERNEL_BASED = ("ksd", "dksd")
BACKENDS = _dksd.BACKENDS


def evaluate(model, X, theta, discrepancy, kernel, diff, block_size=None, backend="auto",
             n_threads=1) -> float:
    """The loss on validated arguments (``n_threads`` a team size)."""
    if discrepancy == "ksd":
        if block_size is None and backend == "auto":
            return _dksd.ksd_value(_dksd.ksd_kernel_matrix(model, X, theta, kernel, n_threads))
        return _dksd.dksd(model, X, theta, kernel, None, False, block_size, backend,
                          n_threads)[0]
    if discrepancy == "dksd":
        return _dksd.dksd(model, X, theta, kernel, diff, False, block_size, backend, n_threads)[0]
    if discrepancy == "sm":
        return 0.5 * _sm.dsm_value(model, X, theta, None)
    if discrepancy == "dsm":
        return _sm.dsm_value(model, X, theta, diff)
    return _sm.dsm_value(model, X, theta, diff if diff is not None else nn_diffusion())


def fd_grad(f, theta):
    """Central differences of a scalar loss in theta (2 p evaluations)."""
    h = 1e-6 * np.maximum(1.0, np.abs(theta))
    g = np.empty_like(theta)
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h[j]
        g[j] = (f(theta + e) - f(theta - e)) / (2.0 * float(h[j]))
    return g


def evaluate_with_grad(model, X, theta, discrepancy, kernel, diff, gradient="analytic",
                       block_size=None, backend="auto", n_threads=1):
    """``(loss, (p,) gradient)`` on validated arguments: the analytic DKSD pass for ksd / dksd
    with ``gradient="analytic"``, central differences of :func:`evaluate` otherwise."""
    if gradient == "analytic" and discrepancy in KERNEL_BASED:
        return _dksd.dksd(model, X, theta, kernel, diff, True, block_size, backend, n_threads)
    f = lambda t: evaluate(model, X, t, discrepancy, kernel, diff, block_size,  # noqa: E731
                           backend, n_threads)
    return f(theta), fd_grad(f, theta)


def information_tensor(model, X, theta, discrepancy, kernel, diff, block_size=None):
    """The information tensor g(theta) (Props. 3-4) on validated arguments, host (p, p)."""
    if discrepancy == "nnsm" and diff is None:
        diff = nn_diffusion()
    J = _deriv.score_dtheta(model, X, theta)
    if diff is None:
        H = J
    else:
        xp, _ = aa.namespace(X=X)
        kind, m = diff.value(X, theta)
        H = mT(xp, kind, m, J)  # (n, d, p)
    if discrepancy not in KERNEL_BASED:
        return _sm.information(H)
    return _dksd.information(model, X, theta, kernel, H, block_size)


def check_model_dimension(model, X) -> None:
    """X must have the model's ``d`` columns (when the model says how many)."""
    md = getattr(model, "d", None)
    if md is not None and X.shape[1] != md:
        raise ValueError(f"X must have {md} columns for {model!r}, got shape {tuple(X.shape)}")


def _check_block_size(block_size):
    return None if block_size is None else val.check_int(block_size, "block_size", lo=1)


def _finite_result(discrepancy, theta, what, call):
    """``call()``, with overflow in a model's Python-float arithmetic and a non-finite result
    turned into a ValueError naming theta (before: a raw ZeroDivisionError, or a NaN gradient
    returned as if it were one)."""
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = call()
    except (OverflowError, ZeroDivisionError, FloatingPointError) as e:
        raise ValueError(
            f"theta: the {discrepancy} {what} overflowed at theta = {theta} "
            f"({type(e).__name__}: {e}); theta is far from the scale of X"
        ) from None
    parts = out if isinstance(out, tuple) else (out,)
    if not all(np.all(np.isfinite(np.asarray(aa.to_host(v) if not isinstance(v, float) else v)))
               for v in parts):
        raise ValueError(
            f"theta: the {discrepancy} {what} is not finite at theta = {theta}; theta is far "
            "from the scale of X (or the model's score overflows there)"
        )
    return out


def validate(model, theta, X, discrepancy, kernel, diffusion, theta_name="theta"):
    """The checked ``(X, theta, diffusion)`` of a loss call; errors name the argument."""
    if not callable(getattr(model, "score", None)):
        raise TypeError(f"model must have a score(x, theta) method, got {type(model).__name__}")
    if not isinstance(discrepancy, str) or discrepancy not in DISCREPANCIES:
        raise ValueError(
            f"unknown discrepancy {discrepancy!r}; choose one of {', '.join(DISCREPANCIES)}"
        )
    xp, _ = aa.namespace(X=X)
    X = val.check_points(X, xp, "X")
    check_model_dimension(model, X)
    if discrepancy in KERNEL_BASED and X.shape[0] < 2:
        raise ValueError("the U-statistic losses need at least 2 points in X")
    check_support(model, X)
    theta = check_theta(model, theta, theta_name)
    diff = as_diffusion(diffusion)
    if discrepancy == "ksd" and diff is not None:
        raise ValueError("discrepancy='ksd' has m = I; give the diffusion to discrepancy='dksd'")
    if discrepancy == "sm" and diff is not None:
        raise ValueError("discrepancy='sm' has m = I; give the diffusion to discrepancy='dsm'")
    if discrepancy in ("dsm", "nnsm") and diff is not None and diff.is_theta_dependent(X, theta):
        raise ValueError(
            "DSM needs a diffusion m(x) that does not depend on theta (Sec. 2.2); "
            "use discrepancy='dksd' for a theta-dependent m"
        )
    if discrepancy not in KERNEL_BASED and kernel is not None:
        raise ValueError(f"discrepancy={discrepancy!r} takes no kernel")
    return X, theta, diff


def loss(model, theta, X, *, discrepancy="ksd", kernel=None, diffusion=None,
         block_size=None, backend="auto", n_threads: int | None = None) -> float:
    """The estimated Stein discrepancy of the sample X to p_theta (the quantity fit() minimises).

    Parameters
    ----------
    model : model object
        Has ``score(x, theta)`` (as the models of :mod:`stein_coreset.estimators` have).
    theta : (p,) array-like
        Parameters (host).
    X : (n, d) array
        Sample, any array-API namespace.
    discrepancy : {"ksd", "dksd", "sm", "dsm", "nnsm"}
        "ksd": U-statistic KSD^2 with K = I k (Eq. 7 with m = I), evaluated by
        ``stein_coreset.engine.KernelMatrix``; "dksd": Eq. 7 with a diffusion m and a
        matrix kernel; "sm": Eq. 8 estimator; "dsm": Eq. 11; "nnsm": DSM with m = diag(x).
    kernel : base kernel, SteinKernel, SeparableKernel or DiagonalKernel, optional
        For ksd / dksd; default IMQ(beta=-1/2) with the median bandwidth of X. A base kernel k
        means K = I k; ``SteinKernel(base, M)`` means K = M k_M with k_M radial in the M-norm,
        which with m = I is exactly the preconditioned Stein kernel of
        :class:`stein_coreset.SteinKernel` (Prop. B.3 of the compression paper).
    diffusion : callable m(x, theta) or Diffusion, optional
        (n,), (n, d) or (n, d, d) per point (scalar, diagonal, full); default m = I.
    block_size : int, optional
        Rows per slab of the blocked (array-API) pair pass.
    backend : {"auto", "cpu", "cuda", "xp"}
        The engine backend of the ksd / dksd pair pass ("auto": by X's namespace and the
        kernel; "xp": the array-API reference; docs/engine.md).
    n_threads : int, optional
        Threads of the compiled pass (default: the usable cores). The result does not depend
        on it.

    Returns
    -------
    float

    Notes
    -----
    O(n^2 d) (ksd, dksd with scalar or diagonal m), O(n^2 d^2) (full m); O(n d^2) for sm / dsm
    / nnsm. The U-statistics are unbiased, so the value can be negative near the minimiser.

    See Also
    --------
    loss_and_grad : with its theta-gradient.
    fit : minimises it.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> X = model.sample(300, [0.5, 2.0], np.random.default_rng(0))     # theta = (mu, sigma)
    >>> round(est.loss(model, [0.5, 2.0], X), 4), round(est.loss(model, [3.0, 2.0], X), 4)
    (-0.0005, 0.2901)
    """
    X, theta, diff = validate(model, theta, X, discrepancy, kernel, diffusion)
    backend = check_backend(backend)
    block_size = _check_block_size(block_size)
    n_threads = effective_n_threads(n_threads)
    return _finite_result(discrepancy, theta, "loss", lambda: evaluate(
        model, X, theta, discrepancy, kernel, diff, block_size, backend, n_threads))


def loss_and_grad(model, theta, X, *, discrepancy="ksd", kernel=None, diffusion=None,
                  gradient="analytic", block_size=None, backend="auto",
                  n_threads: int | None = None):
    """Loss and its theta-gradient, ``(float, (p,) numpy array)``.

    ``gradient="analytic"`` (ksd / dksd): one blocked pass gives dL/dv_i and dL/dm_i, chained
    with the model's ``score_dtheta`` (central differences of the score, O(n p), if missing).
    ``gradient="fd"``, and always for sm / dsm / nnsm: central differences of the loss
    (2 p evaluations). Same arguments as :func:`loss`.

    See Also
    --------
    loss : the value alone.
    information : the information tensor, the metric of Riemannian SGD.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> X = model.sample(300, [0.5, 2.0], np.random.default_rng(0))     # theta = (mu, sigma)
    >>> value, grad = est.loss_and_grad(model, [0.5, 2.0], X)
    >>> round(value, 4), np.round(grad, 4)
    (-0.0005, array([ 0.0079, -0.0023]))
    """
    X, theta, diff = validate(model, theta, X, discrepancy, kernel, diffusion)
    if gradient not in ("analytic", "fd"):
        raise ValueError(f"gradient must be 'analytic' or 'fd', got {gradient!r}")
    backend = check_backend(backend)
    block_size = _check_block_size(block_size)
    n_threads = effective_n_threads(n_threads)
    return _finite_result(discrepancy, theta, "loss or its gradient", lambda: evaluate_with_grad(
        model, X, theta, discrepancy, kernel, diff, gradient, block_size, backend, n_threads))


def information(model, theta, X, *, discrepancy="ksd", kernel=None, diffusion=None,
                block_size=None) -> np.ndarray:
    """Information tensor g(theta) (Props. 3-4) estimated on the sample X, (p, p), PSD.

    DKSD / KSD (Eq. 14): (1/n^2) sum_{a,b} J_a^T m_a K(x_a, x_b) m_b^T J_b with
    J = d/dtheta grad_x log p (the V-statistic, so that it is positive semi-definite);
    DSM / SM / NNSM (Eq. 15): (1/n) sum_a (m_a^T J_a)^T (m_a^T J_a) (m = I for SM). The sample
    stands in for P_theta (at the minimiser they agree). Cost O(n^2 d p) resp. O(n d p^2).

    See Also
    --------
    fit : uses it as the metric of ``optimizer="riemannian_sgd"`` (Eq. 16).
    loss : the discrepancy whose information this is.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> X = model.sample(300, [0.5, 2.0], np.random.default_rng(0))     # theta = (mu, sigma)
    >>> np.round(est.information(model, [0.5, 2.0], X), 4)
    array([[ 0.0434, -0.004 ],
           [-0.004 ,  0.0344]])
    """
    X, theta, diff = validate(model, theta, X, discrepancy, kernel, diffusion)
    block_size = _check_block_size(block_size)
    return _finite_result(discrepancy, theta, "information tensor", lambda: information_tensor(
        model, X, theta, discrepancy, kernel, diff, block_size))


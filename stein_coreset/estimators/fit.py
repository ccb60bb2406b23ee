"""``fit``: minimum Stein discrepancy estimation (Barp et al., 2019, Eq. 4) in one call."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from .._threads import effective_n_threads
from ..kernels import IMQ, SteinKernel, median_bandwidth
from . import losses as _losses
from . import optimize as _opt

__all__ = ["fit", "FitResult", "OPTIMIZERS"]

OPTIMIZERS = ("riemannian_sgd", "sgd", "lbfgs", "closed_form")


@dataclass
class FitResult:
    """Result of :func:`fit`.

    Attributes
    ----------
    theta : (p,) numpy array, the estimate.
    loss : float, the full-data loss at ``theta``.
    history : (iterations + 1, p) numpy array, the parameter trajectory (theta0 first).
    information : (p, p) numpy array, the information tensor g(theta) (Props. 3-4) on the data.
    losses : list of the losses seen along the way (minibatch losses for the SGD methods).
    optimizer, discrepancy : str.
    n_iter : int. converged : bool. message : str.
    """

    theta: np.ndarray
    loss: float
    history: np.ndarray
    information: np.ndarray
    losses: list
    optimizer: str
    discrepancy: str
    n_iter: int
    converged: bool
    message: str


def _fix_kernel(kernel, X, discrepancy):
    """Resolve data-dependent bandwidths once on the full sample (not per minibatch)."""
    if discrepancy not in _losses.KERNEL_BASED:
        return kernel
    if kernel is None:
        return IMQ(sigma=median_bandwidth(X))
    if isinstance(kernel, SteinKernel):
        kernel = kernel.resolve(X)  # a new kernel: the caller's object is never changed
    elif isinstance(kernel, _losses.SeparableKernel) and kernel.base is None:
        kernel = _losses.SeparableKernel(IMQ(sigma=median_bandwidth(X)), kernel.B)
    return kernel


def _run(optimizer, grad, metric, theta0, n, steps, lr, batch_size, rng, in_domain, reg, model,
         diff, X):
    """Dispatch to the optimiser (one function per method, like SciPy's ``_minimize``)."""
    if optimizer == "riemannian_sgd":
        return _opt.riemannian_sgd(grad, metric, theta0, n=n, steps=steps, lr=float(lr),
                                   batch_size=batch_size, rng=rng, in_domain=in_domain, reg=reg)
    if optimizer == "sgd":
        return _opt.sgd(grad, theta0, n=n, steps=steps, lr=float(lr), batch_size=batch_size,
                        rng=rng, in_domain=in_domain)
    if optimizer == "lbfgs":
        return _opt.lbfgs(grad, theta0, steps=steps, bounds=getattr(model, "bounds", None))
    if not getattr(model, "linear_in_theta", False):
        raise ValueError(
            "optimizer='closed_form' needs an exponential-family model (score affine in "
            f"theta, e.g. ExponentialFamily); {model!r} is not one"
        )
    if diff is not None and diff.is_theta_dependent(X, theta0):
        raise ValueError("optimizer='closed_form' needs a diffusion independent of theta")
    return _opt.closed_form(grad, theta0)

def fit(model, X, discrepancy: str = "dksd", kernel=None, diffusion=None,
        optimizer: str = "riemannian_sgd", theta0=None, steps: int = 500,
        batch_size: int | None = None, lr: float | None = None, seed=None,
        gradient: str = "analytic", reg: float = 1e-8,
        n_threads: int | None = None) -> FitResult:
    """Minimum Stein discrepancy estimate argmin_theta SD_hat(X || P_theta) (Eq. 4).

    Parameters
    ----------
    model : model object
        ``score(x, theta)`` and optionally ``score_dtheta``, ``score_dx`` (see ``models``).
    X : (n, d) array
        The sample, any array-API namespace.
    discrepancy : {"ksd", "dksd", "sm", "dsm", "nnsm"}
        See :func:`stein_coreset.estimators.loss`.
    kernel, diffusion
        As in :func:`stein_coreset.estimators.loss`. A median bandwidth is fixed once on X.
    optimizer : {"riemannian_sgd", "sgd", "lbfgs", "closed_form"}
        Riemannian SGD (Eq. 16) with the minibatch information tensor, plain SGD, L-BFGS-B on
        the full loss, or the exact minimiser of the quadratic loss of an exponential family
        (needs ``model.linear_in_theta`` and a theta-independent diffusion).
    theta0 : (p,) array-like, optional
        Start; default ``model.default_theta0(X)`` (median / MAD) or zeros for exponential
        families. Must lie in the parameter domain.
    steps : int
        SGD iterations, or the L-BFGS iteration limit.
    batch_size : int, optional
        Minibatch size for the SGD methods; default min(n, 200). Ignored by lbfgs/closed_form.
    lr : float, optional
        Constant step size; default 0.2 for riemannian_sgd (the metric makes the step
        dimensionless: near the minimiser L ~ (theta - theta*)^T g (theta - theta*), so 1/2 would
        be a Newton step; smaller steps average the minibatch noise), 0.1 for sgd.
    seed : int or numpy Generator, optional
        Minibatch draws.
    gradient : {"analytic", "fd"}
        theta-gradients of ksd / dksd (see :func:`loss_and_grad`).
    reg : float
        Relative eigenvalue floor of the information tensor before inversion.
    n_threads : int, optional
        Team size of the C++ DKSD pass (NumPy input); default the usable cores
        (:func:`stein_coreset._threads.effective_n_threads`). The result does not depend on it.

    Returns
    -------
    FitResult
    """
    if not isinstance(optimizer, str) or optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    xp, dev = aa.namespace(X=X)
    X = val.check_points(X, xp, "X")
    n = int(X.shape[0])
    steps = val.check_int(steps, "steps", lo=1)
    _losses.check_model_dimension(model, X)  # before default_theta0 reads X's columns
    if theta0 is None:
        init = getattr(model, "default_theta0", None)
        if init is None:
            raise ValueError("theta0 is required for a model without default_theta0")
        theta0 = init(X)
    kernel = _fix_kernel(kernel, X, discrepancy)
    X, theta0, diff = _losses.validate(model, theta0, X, discrepancy, kernel, diffusion,
                                       "theta0")
    if batch_size is None:
        batch_size = min(n, 200)
    batch_size = val.check_int(batch_size, "batch_size", lo=2)
    if batch_size > n:
        raise ValueError(f"batch_size must be at most n = {n}, got {batch_size}")
    if lr is None:
        lr = 0.2 if optimizer == "riemannian_sgd" else 0.1
    lr = val.check_positive(lr, "lr")
    reg = val.check_real(reg, "reg", lo=0.0, hi=1.0, lo_open=True)  # documented (0, 1]
    val.check_choice(gradient, "gradient", ("analytic", "fd"))
    rng = val.check_random_state(seed)
    n_threads = effective_n_threads(n_threads)
    in_domain = getattr(model, "in_domain", None)

    def take(batch):
        if batch is None:
            return X
        return xp.take(X, aa.as_index_array(xp, batch, dev), axis=0)

    def grad(theta, batch):
        return _losses.evaluate_with_grad(model, take(batch), theta, discrepancy, kernel, diff,
                                          gradient, n_threads=n_threads)

    def value(theta):
        return _losses.evaluate(model, X, theta, discrepancy, kernel, diff, n_threads=n_threads)

    def metric(theta, batch):
        return _losses.information_tensor(model, take(batch), theta, discrepancy, kernel, diff)

    try:
        res = _run(optimizer, grad, metric, theta0, n, steps, lr, batch_size, rng, in_domain,
                   reg, model, diff, X)
    except (OverflowError, ZeroDivisionError) as e:  # a user model's Python-float arithmetic
        raise ValueError(
            f"the {discrepancy} loss overflowed for this X ({type(e).__name__}: {e}); rescale "
            "X or start theta0 closer to the data"
        ) from None
    theta = res.theta
    if in_domain is not None and not in_domain(theta):  # pragma: no cover - guarded above
        raise ValueError(f"the optimiser left the parameter domain: theta = {theta}")
    try:
        final = value(theta)
        info = _losses.information_tensor(model, X, theta, discrepancy, kernel, diff)
    except (OverflowError, ZeroDivisionError) as e:
        raise ValueError(
            f"the {discrepancy} loss overflowed at the final theta for this X "
            f"({type(e).__name__}: {e}); rescale X"
        ) from None
    converged, message = res.converged, res.message
    if converged and not (math.isfinite(final) and np.all(np.isfinite(theta))):
        converged, message = False, f"the full-data loss at theta is {final}"
    info_h = np.asarray(aa.to_host(info))
    if converged and not (np.all(np.isfinite(info_h)) and np.any(info_h != 0)):
        # every term of the loss is 0 near theta (IMQ(1) against X ~ 1e149): stationary, but
        # theta is not identified by the data
        converged = False
        message = ("the information tensor at theta is zero or not finite: the loss is flat "
                   "there and theta is not identified (a kernel bandwidth far from the scale "
                   "of X?)")
    if converged and optimizer in ("riemannian_sgd", "sgd"):
        start = value(theta0)
        if not final <= start + 1e-8 * (1.0 + abs(start)):
            converged = False
            message = (f"stalled where the loss ({final:.6g}) is above its value at theta0 "
                       f"({start:.6g}): the steps overshot; lower lr")
    if converged and optimizer in ("riemannian_sgd", "sgd") and np.all(res.history == theta0):
        converged = False
        message = ("theta never moved from theta0: every step was rejected (it left the "
                   "parameter domain); lower lr")
    if converged:
        j = _unbounded_towards_boundary(model, theta, final, value)
        if j is not None:
            names = getattr(model, "param_names", None)
            name = names[j] if names else f"theta[{j}]"
            converged = False
            message = (f"the loss keeps decreasing as {name} approaches the boundary of its "
                       f"domain ({name} = {theta[j]:.3g}): it is unbounded below on these "
                       f"{n} points and theta is not a minimiser (more data needed?)")
    return FitResult(theta, final, res.history, info, res.losses, optimizer, discrepancy,
                     res.n_iter, converged, message)


def _unbounded_towards_boundary(model, theta, final, value):
    """The index of a lower-bounded parameter along which the loss still decreases when moved
    1000 times closer to its bound (the fit of 2 or 3 points, whose loss tends to -inf as the
    scale tends to 0), or None. Two probes of the full loss per such parameter."""
    bounds = getattr(model, "bounds", None)
    if not bounds:
        return None
    for j, (lo, _hi) in enumerate(bounds):
        if lo is None:
            continue
        if not theta[j] > lo:  # on L-BFGS-B's bound, nudged inside the open domain
            return j
        t = np.array(theta, dtype=np.float64)
        t[j] = lo + (theta[j] - lo) * 1e-3
        try:
            with np.errstate(all="ignore"):
                v = value(t)
        except (ValueError, ArithmeticError):
            continue
        if v < final - 1e-8 * (1.0 + abs(final)):
            return j
    return None

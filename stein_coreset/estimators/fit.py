"""``fit``: minimum Stein discrepancy estimation (Barp et al., 2019, Eq. 4) in one call."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from .._threads import effective_n_threads
from ..kernels import IMQ, SteinKernel, median_bandwidth
from . import inference as _inference
from . import losses as _losses
from . import optimize as _opt

__all__ = ["fit", "FitResult", "OPTIMIZERS"]

OPTIMIZERS = ("riemannian_sgd", "sgd", "lbfgs", "nelder_mead", "closed_form")
GRADIENT_BASED = ("riemannian_sgd", "sgd", "lbfgs")


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
    n_iter : int. converged : bool. message : str, what happened (and why not converged).
    cov : (p, p) numpy array or None
        The sandwich covariance H^{-1} Sigma H^{-1} / n of ``theta`` (Thms. 4 and 6, see
        ``stein_coreset.estimators.inference``): H the Hessian of the loss, Sigma the
        covariance of the per-sample gradient contributions (the U-statistic's Hoeffding
        projection for KSD / DKSD). None when it does not apply, with the reason in
        ``cov_message``: a model whose score is not differentiable in theta, a Hessian that is
        not positive definite, a fit that did not converge.
    stderr : (p,) numpy array or None, sqrt(diag(cov)).
    cov_message : str.

    See Also
    --------
    fit : returns it.
    SteinEstimator : the same as a scikit-learn estimator.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> X = model.sample(300, [0.5, 2.0], np.random.default_rng(0))
    >>> f = est.fit(model, X, discrepancy="sm", optimizer="lbfgs")
    >>> np.round(f.theta, 4), np.round(f.stderr, 4), f.optimizer
    (array([0.4284, 2.0356]), array([0.1175, 0.0838]), 'lbfgs')
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
    cov: np.ndarray | None = None
    stderr: np.ndarray | None = None
    cov_message: str = ""


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


def _run(optimizer, grad, value, metric, theta0, n, steps, lr, batch_size, rng, in_domain, reg,
         model, diff, X, tolerance, callback):
    """Dispatch to the optimiser (one function per method, like SciPy's ``_minimize``)."""
    if optimizer == "riemannian_sgd":
        return _opt.riemannian_sgd(grad, metric, theta0, n=n, steps=steps, lr=float(lr),
                                   batch_size=batch_size, rng=rng, in_domain=in_domain, reg=reg,
                                   tolerance=tolerance, callback=callback)
    if optimizer == "sgd":
        return _opt.sgd(grad, theta0, n=n, steps=steps, lr=float(lr), batch_size=batch_size,
                        rng=rng, in_domain=in_domain, tolerance=tolerance, callback=callback)
    if optimizer == "lbfgs":
        return _opt.lbfgs(grad, theta0, steps=steps, lower=_lower_bounds(model),
                          callback=callback)
    if optimizer == "nelder_mead":
        return _opt.nelder_mead(value, theta0, steps=max(steps, 200 * len(theta0)),
                                lower=_lower_bounds(model), callback=callback)
    if not getattr(model, "linear_in_theta", False):
        raise ValueError(
            "optimizer='closed_form' needs an exponential-family model (score affine in "
            f"theta, e.g. ExponentialFamily); {model!r} is not one"
        )
    if diff is not None and diff.is_theta_dependent(X, theta0):
        raise ValueError("optimizer='closed_form' needs a diffusion independent of theta")
    return _opt.closed_form(grad, theta0)


def _lower_bounds(model):
    """Per free parameter, its open lower bound or None (from the model's ``bounds``)."""
    bounds = getattr(model, "bounds", None)
    if not bounds:
        return None
    return [None if lo is None else float(lo) for lo, _hi in bounds]


def _guarded(theta0_ok, theta, what, call, check=True):
    """``call()``; a non-finite result or an arithmetic error at theta becomes a
    :class:`~stein_coreset.estimators.optimize.NumericalExcursion` naming what happened (after
    theta0 was evaluated without error, a ValueError is one too: the data were validated)."""
    try:
        with np.errstate(all="ignore"):
            out = call()
    except (OverflowError, ZeroDivisionError, FloatingPointError) as e:
        raise _opt.NumericalExcursion(theta, f"the {what} overflowed ({type(e).__name__})") \
            from None
    except ValueError as e:
        if not theta0_ok[0]:
            raise
        raise _opt.NumericalExcursion(theta, str(e).split(" for theta")[0].split(" at theta")[0]) \
            from None
    parts = out if isinstance(out, tuple) else (out,)
    for v in parts if check else ():
        if v is None:
            continue
        a = np.asarray(aa.to_host(v) if not isinstance(v, (float, int)) else v, dtype=np.float64)
        if not np.all(np.isfinite(a)):
            raise _opt.NumericalExcursion(theta, f"the {what} is NaN or inf")
    return out


def fit(model, X, discrepancy: str = "dksd", kernel=None, diffusion=None,
        optimizer: str = "riemannian_sgd", theta0=None, steps: int = 500,
        batch_size: int | None = None, lr: float | None = None, seed=None,
        gradient: str = "analytic", reg: float = 1e-8,
        n_threads: int | None = None, *, callback=None, verbose: bool = False,
        stderr: bool = True) -> FitResult:
    """Minimum Stein discrepancy estimate argmin_theta SD_hat(X || P_theta) (Eq. 4).

    Parameters
    ----------
    model : model object
        ``score(x, theta)`` and optionally ``score_dtheta``, ``score_dx`` (see ``models``).
        A model may list in ``nonsmooth_params`` the parameters in which its score is not
        differentiable (``SymmetricBessel`` with s <= (d + 1) / 2: the location); the
        gradient-based optimisers refuse those (ValueError), ``"nelder_mead"`` fits them.
        Parameters listed in ``singular_params`` (the score unbounded at them: the Bessel
        location for s < (d + 1) / 2) are probed next to the nearest sample point, where the
        U-statistic loss can run to -inf: such a fit is not ``converged``.
    X : (n, d) array or array-like
        The sample, any array-API namespace; lists and pandas DataFrames are read as NumPy.
    discrepancy : {"ksd", "dksd", "sm", "dsm", "nnsm"}
        See :func:`stein_coreset.estimators.loss`.
    kernel, diffusion
        As in :func:`stein_coreset.estimators.loss`. Default kernel: IMQ (beta = -1/2) with the
        median heuristic bandwidth sigma = median_{i<j} ||x_i - x_j|| of X (fixed once on the
        full sample, so on the data's scale); results can depend on it (compare a few with
        :func:`select_lengthscale`).
    optimizer : {"riemannian_sgd", "sgd", "lbfgs", "nelder_mead", "closed_form"}
        Riemannian SGD (Eq. 16) with the minibatch information tensor, plain SGD (both with
        Polyak-Ruppert averaging and a stopping rule on the average, see
        ``stopping_rule``), L-BFGS-B on the full loss
        (scales on the log scale), derivative-free Nelder-Mead on the full loss, or the exact
        minimiser of the quadratic loss of an exponential family (needs
        ``model.linear_in_theta`` and a theta-independent diffusion).
    theta0 : (p,) array-like, optional
        Start; default ``model.default_theta0(X)`` (median / MAD) or zeros for exponential
        families. Must lie in the parameter domain.
    steps : int
        Maximum SGD iterations, or the L-BFGS / Nelder-Mead iteration limit.
    batch_size : int, optional
        Minibatch size for the SGD methods; default min(n, 200). Ignored by the others.
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
        Threads of the compiled DKSD pass (default: the usable cores). The result does not
        depend on it.
    callback : callable, optional
        ``callback(iteration, theta, loss)`` after each iteration (the minibatch loss for the
        SGD methods); an exception it raises propagates.
    verbose : bool
        Print progress (about ten lines per fit) and the outcome.
    stderr : bool
        Compute ``cov`` / ``stderr`` (4 p extra full-data passes); also the tolerance of the
        stochastic optimisers' stopping rule.

    Returns
    -------
    FitResult
        ``converged`` is True only for a finite, stationary minimiser: a numerical excursion
        (non-finite score, loss or gradient at some theta) ends the run with the best finite
        iterate and ``converged=False``; so do a loss that plateaus or keeps decreasing as a
        parameter runs away, a gradient that misses a change of the loss (a kink), and a
        stochastic run whose averaged iterate is not yet stable to a fifth of its standard
        error. Data errors (NaN in X, wrong shapes) raise ValueError.

    See Also
    --------
    loss : the objective.
    select_lengthscale : picks the kernel's lengthscale by held-out loss.
    SteinEstimator : a scikit-learn estimator around it.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> X = model.sample(300, [0.5, 2.0], np.random.default_rng(0))
    >>> f = est.fit(model, X, discrepancy="sm", optimizer="lbfgs")
    >>> bool(f.converged), f.stderr.shape
    (True, (2,))
    """
    if not isinstance(optimizer, str) or optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    (X,) = aa.as_arrays(X=X)
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
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    nonsmooth = tuple(getattr(model, "nonsmooth_params", ()) or ())
    if nonsmooth and optimizer in GRADIENT_BASED:
        raise ValueError(
            f"optimizer={optimizer!r} needs the loss's gradient, but the score of {model!r} is "
            f"not differentiable in {', '.join(nonsmooth)} (a kink at x = loc: the chain-rule "
            "gradient misses the jumps of the loss); use optimizer='nelder_mead', or fix "
            f"{', '.join(nonsmooth)} in the model"
        )

    def take(batch):
        if batch is None:
            return X
        return xp.take(X, aa.as_index_array(xp, batch, dev), axis=0)

    theta0_ok = [False]

    def grad(theta, batch):
        return _guarded(theta0_ok, theta, f"{discrepancy} loss or its gradient",
                        lambda: _losses.evaluate_with_grad(model, take(batch), theta,
                                                           discrepancy, kernel, diff, gradient,
                                                           n_threads=n_threads))

    def value(theta):
        return _guarded(theta0_ok, theta, f"{discrepancy} loss",
                        lambda: _losses.evaluate(model, X, theta, discrepancy, kernel, diff,
                                                 n_threads=n_threads))

    def metric(theta, batch):
        return _guarded(theta0_ok, theta, "information tensor",
                        lambda: _losses.information_tensor(model, take(batch), theta,
                                                           discrepancy, kernel, diff))

    def covariance(theta):
        if nonsmooth:
            return _inference.Sandwich(None, None, None, "the score is not differentiable in "
                                       f"{', '.join(nonsmooth)}: no asymptotic normal theory")
        return _guarded(theta0_ok, theta, "sandwich covariance",
                        lambda: _inference.sandwich(model, X, theta, discrepancy, kernel, diff,
                                                    n_threads), check=False)

    def tolerance(theta):
        if not stderr:
            return 1e-3 * (1.0 + np.abs(theta))
        sw = covariance(theta)
        if sw.cov is None:
            return 1e-3 * (1.0 + np.abs(theta))
        return np.sqrt(np.diag(sw.cov))

    cb = _progress(callback, verbose, steps, optimizer)
    try:
        start = value(theta0)
    except (OverflowError, ZeroDivisionError) as e:
        raise ValueError(
            f"the {discrepancy} loss overflowed at theta0 for this X ({type(e).__name__}: {e}); "
            "rescale X or start theta0 closer to the data"
        ) from None
    except _opt.NumericalExcursion as e:
        raise ValueError(f"theta0: {e}; start closer to the data") from None
    theta0_ok[0] = True
    res = _run(optimizer, grad, value, metric, theta0, n, steps, lr, batch_size, rng,
               in_domain, reg, model, diff, X, tolerance, cb)
    theta = res.theta
    converged, message = res.converged, res.message
    if in_domain is not None and not in_domain(theta):  # an average never leaves a convex domain
        theta, converged = np.array(theta0, dtype=np.float64), False
        message = f"the optimiser left the parameter domain; {message}"
    try:
        final = value(theta)
        info = metric(theta, None)
    except _opt.NumericalExcursion as e:
        theta, final, converged = np.array(theta0, dtype=np.float64), start, False
        message = f"{message}; at the result: {e}; returning theta0"
        info = _losses.information_tensor(model, X, theta, discrepancy, kernel, diff)
    if converged and not (math.isfinite(final) and np.all(np.isfinite(theta))):
        converged, message = False, f"the full-data loss at theta is {final}"
    info_h = np.asarray(aa.to_host(info))
    names = getattr(model, "param_names", None) or [f"theta[{j}]" for j in range(theta.size)]
    # the information tensor comes from score_dtheta, which is 0 in a non-smooth parameter
    # (the Laplace location): judge identification by the smooth parameters only
    smooth = [j for j, nm in enumerate(names) if nm not in nonsmooth]
    info_s = info_h[np.ix_(smooth, smooth)] if info_h.ndim == 2 else info_h
    if res.excursion is None and smooth and not (np.all(np.isfinite(info_h))
                                                 and np.any(info_s != 0)):
        # every term of the loss is 0 near theta (IMQ(1) against X ~ 1e149): stationary, but
        # theta is not identified by the data
        converged = False
        message = ("the information tensor at theta is zero or not finite: the loss is flat "
                   "there and theta is not identified (a kernel bandwidth far from the scale "
                   "of X?)")
    if converged and optimizer in ("riemannian_sgd", "sgd"):
        if not final <= start + 1e-8 * (1.0 + abs(start)):
            converged = False
            message = (f"stalled where the loss ({final:.6g}) is above its value at theta0 "
                       f"({start:.6g}): the steps overshot; lower lr")
    if (optimizer in ("riemannian_sgd", "sgd") and np.all(res.history == theta0)
            and (converged or message == res.message)):  # a flat loss says so itself
        converged = False
        message = ("theta never moved from theta0: every step was rejected (it left the "
                   "parameter domain); lower lr")
    if converged:
        j = _unbounded_towards_boundary(model, theta, final, value)
        if j is not None:
            converged = False
            message = (f"the loss keeps decreasing as {names[j]} approaches the boundary of "
                       f"its domain ({names[j]} = {theta[j]:.3g}): it is unbounded below on "
                       f"these {n} points and theta is not a minimiser (more data needed?)")
    if converged:
        msg = _runaway(model, theta, final, value, names)
        if msg:
            converged, message = False, msg
    sw = None
    if stderr and res.excursion is None and np.all(np.isfinite(theta)):
        try:
            sw = covariance(theta)
        except _opt.NumericalExcursion as e:
            sw = _inference.Sandwich(None, None, None, str(e))
    if converged and not nonsmooth:
        msg = _kink(theta, final, value, sw, info_h, names)
        if msg:
            converged, message = False, msg
    singular = tuple(getattr(model, "singular_params", ()) or ())
    if converged and singular:
        msg = _unbounded_near_sample(X, theta, final, value, names, singular)
        if msg:
            converged, message = False, msg
    cov = sd = None
    cov_message = "not computed (stderr=False)" if not stderr else "the fit stopped early"
    if sw is not None:
        cov, cov_message = sw.cov, sw.message
        if cov is not None:
            sd = np.sqrt(np.diag(cov))
            if not converged:
                cov_message += " at a theta that is not a converged minimiser: use with care"
    if verbose:
        print(f"[fit] {optimizer}/{discrepancy}: theta = {np.array2string(theta, precision=5)}"
              f", loss = {final:.6g}, converged = {converged}: {message}", flush=True)
    return FitResult(theta, final, res.history, info, res.losses, optimizer, discrepancy,
                     res.n_iter, converged, message, cov, sd, cov_message)


def _progress(callback, verbose, steps, optimizer):
    """The per-iteration hook: the user's callback and, when verbose, about ten lines."""
    if callback is None and not verbose:
        return None
    every = max(1, steps // 10)

    def hook(t, theta, loss):
        if verbose and (t % every == 0 or t == 1):
            print(f"[fit] {optimizer} {t}/{steps}: loss {loss:.6g}, theta "
                  f"{np.array2string(theta, precision=5)}", flush=True)
        if callback is not None:
            callback(t, theta, loss)

    return hook


def _runaway(model, theta, final, value, names):
    """A message when the loss does not rise as a parameter moves 10 and 1000 times further out
    (a scale multiplied away from its bound, a location moved away from 0): the minimiser may
    lie at infinity, or theta has run away along a plateau. Up to 2 p full-loss evaluations."""
    bounds = getattr(model, "bounds", None) or [(None, None)] * theta.size
    tol = 1e-8 * (1.0 + abs(final))
    for j, (lo, _hi) in enumerate(bounds):
        vals = []
        for f in (10.0, 1000.0):
            t = np.array(theta, dtype=np.float64)
            if lo is not None:
                t[j] = lo + (theta[j] - lo) * f
            else:
                t[j] = theta[j] + np.copysign(f * (1.0 + abs(theta[j])), theta[j] or 1.0)
            try:
                vals.append(value(t))
            except _opt.NumericalExcursion:
                break
        if len(vals) == 2 and vals[1] <= final + tol:
            return (f"the loss does not rise as {names[j]} runs away ({final:.4g} at "
                    f"{names[j]} = {theta[j]:.4g}, {vals[0]:.4g} at 10x, {vals[1]:.4g} at "
                    f"1000x further out): it plateaus or keeps decreasing, so {names[j]} is not "
                    "identified by this loss or its minimiser lies at infinity (a different "
                    "diffusion m or kernel?)")
    return None


def _kink(theta, final, value, sw, info, names):
    """A message when the gradient misses a change of the loss near theta.

    Along the weakest direction u of the Hessian H (or of the information tensor when no
    Hessian was formed, which then only tests for a zero curvature) and along each
    coordinate, the loss at theta +- delta is compared with its quadratic model
    L + g delta + H delta^2 / 2 (g the gradient, 0 at a minimiser); delta is a quarter of the
    standard error, or 1e-2 (1 + |theta_j|) where there is none. A discrepancy of more than
    half the quadratic term (plus rounding) means the derivatives do not describe the loss:
    a kink in theta (the gradient is zero while the loss is not flat), or a loss that is flat
    and theta not identified. Up to 2 (p + 1) full-loss evaluations.
    """
    have_hessian = sw is not None and sw.hessian is not None
    H = sw.hessian if have_hessian else 2.0 * info
    cov = sw.cov if sw is not None else None
    g = sw.gradient if sw is not None and sw.gradient is not None else np.zeros(theta.size)
    p = theta.size
    w, Q = np.linalg.eigh(0.5 * (H + H.T))
    top = float(np.max(np.abs(w))) if np.all(np.isfinite(w)) else np.inf
    dirs = []
    if not (top > 0 and np.isfinite(top)) or w[0] <= 1e-6 * top:
        dirs.append(("weak", Q[:, 0]))
    for j in range(p):
        e = np.zeros(p)
        e[j] = 1.0
        dirs.append((j, e))
    tol = 1e-10 * (1.0 + abs(final))
    for key, u in dirs:
        if cov is not None and key != "weak":
            delta = 0.25 * float(np.sqrt(cov[key, key]))
        else:
            delta = 1e-2 * (1.0 + float(np.abs(u) @ np.abs(theta)))
        quad = 0.5 * float(u @ H @ u) * delta * delta
        for sgn in (1.0, -1.0):
            try:
                v = value(theta + sgn * delta * u)
            except _opt.NumericalExcursion:
                continue
            lin = sgn * delta * float(g @ u)
            if not have_hessian and abs(quad) > tol:
                # 2 g(theta) is the Hessian only for a well-specified model: with contaminated
                # or misspecified data it can be a fraction of it, so only a zero curvature
                # (a kink's signature) is judged without a Hessian
                continue
            if abs(v - final - lin - quad) > 0.5 * abs(quad) + tol:
                what = names[key] if key != "weak" else (
                    "the direction " + np.array2string(u, precision=3))
                if abs(quad) <= tol:
                    return (f"the gradient and Hessian of the loss are zero along {what}, but "
                            f"the loss changes there ({final:.6g} -> {v:.6g} at a step of "
                            f"{delta:.3g}): the score is not differentiable in theta (a kink?),"
                            " so the gradient-based fit cannot be trusted; use "
                            "optimizer='nelder_mead'")
                return (f"the loss near theta does not follow its derivatives along {what} "
                        f"({final:.6g} -> {v:.6g} at a step of {delta:.3g}, expected "
                        f"{final + lin + quad:.6g}): not a smooth minimiser")
    return None


def _unbounded_near_sample(X, theta, final, value, names, singular):
    """A message when theta sits on, or the loss can go below its value at theta next to, the
    sample point nearest to the location parameters (``singular``, where the model's score is
    unbounded): the sample loss is then unbounded below (Sec. 4.1's rough Bessel densities)
    and theta is only a local minimum, or a point where the loss runs to -inf. Up to four
    full-loss evaluations."""
    idx = [names.index(nm) for nm in singular if nm in names]
    if not idx:
        return None
    Xh = aa.to_host(X)
    if Xh.shape[1] != len(idx):
        return None
    gap = np.sqrt(np.sum((Xh - theta[idx][None, :]) ** 2, axis=1))
    i = int(np.argmin(gap))
    unit = 1.0 + float(np.abs(Xh[i]).max())
    lowest = (final, None)
    for rel in (1e-9, 1e-13):
        for sgn in (1.0, -1.0):
            t = np.array(theta, dtype=np.float64)
            t[idx] = Xh[i]
            t[idx[0]] += sgn * rel * unit
            try:
                v = value(t)
            except _opt.NumericalExcursion:
                continue
            if v < lowest[0]:
                lowest = (v, rel)
    on_point = gap[i] <= 1e-6 * unit
    if not (on_point or lowest[0] < final - 1e-6 * (1.0 + abs(final))):
        return None
    where = (f"theta is {gap[i]:.2g} from the sample point {Xh[i].tolist()}" if on_point else
             f"{lowest[0]:.4g} with {', '.join(singular)} {lowest[1]:.0e} from the sample point "
             f"{Xh[i].tolist()}, against {final:.4g} at theta")
    return ("the loss is unbounded below next to every sample point (" + where + "): the "
            "score is singular at the location, so the sample loss has no minimiser and theta "
            "is a local minimum or a spike at a sample point, which depends on theta0 (a "
            "smoother model, or a robust estimate such as the median)")


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

"""``fit``: minimum Stein discrepancy estimation (Barp et al., 2019, Eq. 4) in one call.

The steps, each in its own module: validate the data against the model (its dimension and
support, ``stein_coreset.estimators.domains``) and the model's own derivatives
(:mod:`~stein_coreset.estimators.derivatives`); run the optimiser
(:mod:`~stein_coreset.estimators.optimize`) on the loss
(:mod:`~stein_coreset.estimators.objective`); verify the result is a minimiser, polishing or
restarting once (``stein_coreset.estimators.verify``,
:mod:`~stein_coreset.estimators.checks`); judge the standard errors' tails
(``stein_coreset.estimators.tails``); return a
:class:`~stein_coreset.estimators.result.FitResult`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from .._threads import effective_n_threads
from ..kernels import IMQ, SteinKernel, median_bandwidth
from . import checks as _checks
from . import losses as _losses
from . import optimize as _opt
from . import verify as _verify
from .derivatives import check_derivatives
from .domains import ParameterSpace
from .objective import Objective
from .result import FitResult, IdentifiabilityWarning, StandardErrorWarning
from .tails import XI_WARN, tail_shapes

__all__ = ["fit", "OPTIMIZERS", "DEFAULT_SEED"]

OPTIMIZERS = ("riemannian_sgd", "sgd", "lbfgs", "nelder_mead", "closed_form")
GRADIENT_BASED = ("riemannian_sgd", "sgd", "lbfgs")
STOCHASTIC = ("riemannian_sgd", "sgd")
#: The seed of the stochastic optimisers when ``seed=None``: the default fit is reproducible.
DEFAULT_SEED = 0


def _fix_kernel(kernel, X, discrepancy):
    """Resolve data-dependent bandwidths once on the full sample (not per minibatch)."""
    if discrepancy not in _losses.KERNEL_BASED:
        return kernel
    try:
        if kernel is None:
            return IMQ(sigma=median_bandwidth(X))
        if isinstance(kernel, SteinKernel):
            return kernel.resolve(X)  # a new kernel: the caller's object is never changed
        if isinstance(kernel, _losses.SeparableKernel) and kernel.base is None:
            return _losses.SeparableKernel(IMQ(sigma=median_bandwidth(X)), kernel.B)
    except ValueError as e:
        hint = _checks.data_hint(X)
        if not hint:
            raise
        raise ValueError(f"X: the median-heuristic kernel bandwidth of X failed ({e}){hint}") \
            from None
    return kernel


def _spread(X) -> float:
    """The data's unit: the mean over columns of the scaled MAD (or of the sd, or 1)."""
    Xh = aa.to_host(X)
    med = np.median(Xh, axis=0)
    s = float(np.mean(np.median(np.abs(Xh - med), axis=0))) / 0.6745
    if not (s > 0 and math.isfinite(s)):
        s = float(np.mean(np.std(Xh, axis=0)))
    return s if s > 0 and math.isfinite(s) else 1.0


def _run(optimizer, obj, model, diff, X, theta0, coords, opts, tolerance, callback):
    """Dispatch to the optimiser (one function per method, like SciPy's ``_minimize``)."""
    steps, lr, batch_size, rng, reg = opts
    inside = coords.space.inside
    if optimizer == "riemannian_sgd":
        return _opt.riemannian_sgd(obj.grad, obj.metric, theta0, n=obj.n, steps=steps,
                                   lr=float(lr), batch_size=batch_size, rng=rng,
                                   in_domain=inside, reg=reg, tolerance=tolerance,
                                   callback=callback)
    if optimizer == "sgd":
        return _opt.sgd(obj.grad, theta0, n=obj.n, steps=steps, lr=float(lr),
                        batch_size=batch_size, rng=rng, in_domain=inside, tolerance=tolerance,
                        callback=callback)
    if optimizer == "lbfgs":
        return _opt.lbfgs(obj.grad, theta0, steps=steps, coords=coords, callback=callback)
    if optimizer == "nelder_mead":
        return _opt.nelder_mead(obj.value, theta0, steps=max(steps, 200 * len(theta0)),
                                coords=coords, callback=callback)
    if not getattr(model, "linear_in_theta", False):
        raise ValueError(
            "optimizer='closed_form' needs an exponential-family model (score affine in "
            f"theta, e.g. ExponentialFamily); {model!r} is not one"
        )
    if diff is not None and diff.is_theta_dependent(X, theta0):
        raise ValueError("optimizer='closed_form' needs a diffusion independent of theta")
    return _opt.closed_form(obj.grad, theta0)


@dataclass
class _Outcome:
    theta: np.ndarray
    loss: float
    converged: bool
    message: str
    local: object = None
    path: tuple = ()


def _start_loss(obj, model, X, theta0, from_data, discrepancy):
    """The loss at theta0; a failure there blames the data when they are the cause (theta0 came
    from them, or the model's default start fails too), theta0 otherwise."""
    try:
        return obj.value(theta0)
    except (OverflowError, ZeroDivisionError, _opt.NumericalExcursion) as e:
        what = f"the {discrepancy} loss is not finite at theta0 ({e})"
    except ValueError as e:  # a non-finite score at theta0; other errors are the model's
        if "NaN or inf" not in str(e) and "overflow" not in str(e):
            raise
        what = f"the {discrepancy} loss is not finite at theta0 ({e})"
    blame_data = from_data
    if not from_data and getattr(model, "default_theta0", None) is not None:
        try:
            obj.value(model.default_theta0(X))
        except (OverflowError, ZeroDivisionError, ValueError, _opt.NumericalExcursion):
            blame_data = True
    if blame_data:
        raise ValueError(f"X: {what}, a start computed from X itself, so the data are the "
                         f"problem{_checks.data_hint(X) or ' (rescale X)'}") from None
    raise ValueError(f"theta0: {what}; start closer to the data") from None


def fit(model, X, discrepancy: str = "dksd", kernel=None, diffusion=None,
        optimizer: str = "riemannian_sgd", theta0=None, steps: int = 500,
        batch_size: int | None = None, lr: float | None = None, seed=None,
        gradient: str = "analytic", reg: float = 1e-8,
        n_threads: int | None = None, *, callback=None, verbose: bool = False,
        stderr: bool = True, polish: bool = True) -> FitResult:
    """Minimum Stein discrepancy estimate argmin_theta SD_hat(X || P_theta) (Eq. 4).

    Parameters
    ----------
    model : model object
        ``score(x, theta)`` and optionally ``score_dtheta``, ``score_dx`` (checked once against
        central differences of the score at theta0: a mismatch is a ValueError naming the
        derivative), ``param_names``, ``bounds`` (an open interval per parameter, e.g.
        ``(-1, 1)`` for a correlation) and ``support`` (the data's open interval; a sample
        outside is refused by name); see ``stein_coreset.estimators.domains``.
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
        ``stopping_rule``), L-BFGS-B on the full loss, derivative-free Nelder-Mead on the full
        loss (both in unit-free coordinates: bounded parameters transformed, the loss divided
        by its value at theta0, so a fit of 1000 X is 1000 times a fit of X), or the exact
        minimiser of the quadratic loss of an exponential family (needs
        ``model.linear_in_theta`` and a theta-independent diffusion). Whichever ran, the
        result is then verified (below).
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
        be a Newton step; smaller steps average the minibatch noise), 0.1 / lambda_max(g(theta0))
        for sgd (the same step in the units of the loss's curvature at the start, so that data
        in any units give the same iterates; a given ``lr`` has units theta^2 / loss).
    seed : int or numpy Generator, optional
        Minibatch draws of the stochastic optimisers. None means ``DEFAULT_SEED`` (0), so the
        default fit is reproducible; pass a ``numpy.random.Generator`` (or other ints) for
        independent runs. The deterministic optimisers ignore it.
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
        Report ``cov`` / ``stderr`` and check their tails. The verification computes the
        sandwich either way (4 p + 1 full-data passes per Newton step).
    polish : bool
        Polish the optimiser's result by Newton steps and restart once on failure (default).
        False reports the optimiser's own answer (to compare optimisers, as Sec. 4.2 does); it
        is still checked, so ``converged`` is True only if that answer passes the check.

    Returns
    -------
    FitResult
        ``converged`` is True only at a verified minimiser: the Newton step H^-1 g of the
        full-data loss is at most ``verify.NEWTON_TOLERANCE`` (1%) of a standard error in every
        parameter, H is positive definite and not singular (theta identified), and the loss
        rises as any parameter runs away or approaches a bound, follows its derivatives near
        theta, and has no lower value next to a sample point where the score is singular. The
        optimiser's result is polished by Newton steps, and restarted once with L-BFGS-B if
        that fails. A numerical excursion (non-finite score, loss or gradient at some theta)
        or a diverging stochastic run ends with the best finite iterate and
        ``converged=False``. ``message`` says what happened in words. Warnings
        (:class:`StandardErrorWarning`, :class:`IdentifiabilityWarning`) are issued and kept
        in ``warnings``. Data errors (NaN in X, wrong shapes, points outside the model's
        support, values that overflow the loss) raise ValueError naming X.

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
    >>> bool(f.converged), f.param_names, f.stderr.shape
    (True, ('loc', 'scale'), (2,))
    """
    if not isinstance(optimizer, str) or optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    (X,) = aa.as_arrays(X=X)
    xp, _dev = aa.namespace(X=X)
    X = val.check_points(X, xp, "X")
    n = int(X.shape[0])
    steps = val.check_int(steps, "steps", lo=1)
    _losses.check_model_dimension(model, X)  # before default_theta0 reads X's columns
    from_data = theta0 is None
    if from_data:
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
    lr_default = lr is None
    if lr_default:
        lr = 0.2 if optimizer == "riemannian_sgd" else 0.1
    lr = val.check_positive(lr, "lr")
    reg = val.check_real(reg, "reg", lo=0.0, hi=1.0, lo_open=True)  # documented (0, 1]
    val.check_choice(gradient, "gradient", ("analytic", "fd"))
    seed_used = DEFAULT_SEED if seed is None else seed
    rng = val.check_random_state(seed_used)
    seed_used = seed_used if isinstance(seed_used, (int, np.integer)) else None
    n_threads = effective_n_threads(n_threads)
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
    space = ParameterSpace.of(model, theta0.size)
    check_derivatives(model, X, theta0, space.names,
                      bounds=list(zip(space.lower, space.upper, strict=True)))
    obj = Objective(model, X, discrepancy, kernel, diff, gradient, n_threads, nonsmooth)
    start = _start_loss(obj, model, X, theta0, from_data, discrepancy)
    obj.started = True
    unit = _spread(X)

    def coordinates(theta, loss):
        """Unit-free coordinates at theta: the loss in units of its gradient there (in phi),
        so L-BFGS-B's first step has length 1 in phi whatever the units of X."""
        co = _opt.Coordinates(space, theta, unit, 1.0)
        lu = abs(loss)
        if optimizer != "nelder_mead" and not nonsmooth:
            try:
                lu = float(np.linalg.norm(co.chain(theta, obj.grad(theta)[1]))) or lu
            except _opt.NumericalExcursion:
                pass
        return _opt.Coordinates(space, theta, unit, lu)

    coords = coordinates(theta0, start)

    def tolerance(theta):  # the stochastic optimisers' stopping rule, in standard errors
        sw = obj.sandwich(theta) if stderr else None
        if sw is None or sw.cov is None:
            return 1e-3 * (1.0 + np.abs(theta))
        return np.sqrt(np.diag(sw.cov))

    def restart(theta):  # the one restart of a failed verification
        return _opt.lbfgs(obj.grad, theta, steps=steps,
                          coords=coordinates(theta, _safe_value(obj, theta, start)))

    def nm_restart(theta, loss):
        return _opt.nelder_mead(obj.value, theta, steps=max(steps, 200 * theta.size),
                                coords=coordinates(theta, loss))

    if optimizer == "sgd" and lr_default:  # 0.1 in the units of the loss's curvature at theta0
        try:
            top = float(np.max(np.linalg.eigvalsh(np.asarray(aa.to_host(obj.metric(theta0))))))
            lr = 0.1 / top if top > 0 and math.isfinite(top) else lr
        except _opt.NumericalExcursion:
            pass
    cb = _progress(callback, verbose, steps, optimizer)
    res = _run(optimizer, obj, model, diff, X, theta0, coords,
               (steps, lr, batch_size, rng, reg), tolerance, cb)
    out = _conclude(obj, space, res, optimizer, theta0, start, X, model,
                    restart if polish else None, nm_restart if polish else None,
                    coords.loss_unit)
    theta, final, converged, message = out.theta, out.loss, out.converged, out.message
    history = np.concatenate([res.history, np.asarray(out.path).reshape(-1, theta.size)]) \
        if len(out.path) else res.history
    try:
        info = obj.metric(theta, None)
    except _opt.NumericalExcursion:
        info = np.full((theta.size, theta.size), np.nan)
    info_h = np.asarray(aa.to_host(info))
    if res.excursion is None and not nonsmooth and not (np.all(np.isfinite(info_h))
                                                        and np.any(info_h != 0)):
        # every term of the loss is 0 near theta (IMQ(1) against X ~ 1e149): theta is not
        # identified by the data
        converged = False
        message = ("the information tensor at theta is zero or not finite: the loss is flat "
                   "there and theta is not identified"
                   + (" (a kernel bandwidth far from the scale of X?)"
                      if discrepancy in _losses.KERNEL_BASED else "") + _checks.data_hint(X))
    loc = out.local
    notes, cov, sd, xi = [], None, None, None
    cov_message = "not computed (stderr=False)" if not stderr else "the fit stopped early"
    if loc is not None and loc.sandwich is not None:
        sw = loc.sandwich
        singular = loc.lambda_min is not None and abs(loc.lambda_min) <= _verify.SINGULAR
        if stderr:
            cov_message = loc.reason if singular else sw.message
        if stderr and sw.cov is not None and not singular:
            cov = sw.cov
            sd = np.sqrt(np.diag(cov))
            if not converged:
                cov_message += " at a theta that is not a converged minimiser: use with care"
            xi = tail_shapes(sw.contributions)
            heavy = [j for j in range(theta.size) if xi[j] > XI_WARN]
            if heavy:
                notes.append(_tail_warning(space, xi, heavy, n))
                cov_message += "; not reliable: " + notes[-1]
            elif np.all(np.isfinite(xi)):
                cov_message += (f"; tails of the per-point contributions: generalised Pareto "
                                f"shape {np.array2string(xi, precision=2)} (at most {XI_WARN}"
                                "; a finite variance needs < 1/2)")
        if loc.lambda_min is not None and _verify.SINGULAR < loc.lambda_min \
                <= _verify.NEAR_SINGULAR:
            notes.append(
                "the parameters are nearly collinear: the Hessian of the loss is close to "
                "singular along the direction "
                f"{_verify.describe_direction(loc.direction, space.names)} (smallest eigenvalue of "
                f"its correlation form {loc.lambda_min:.2g}), so their estimates are weakly "
                "identified and strongly correlated")
    for note in notes:
        cat = StandardErrorWarning if "variance" in note else IdentifiabilityWarning
        warnings.warn(note, cat, stacklevel=2)
    if verbose:
        print(f"[fit] {optimizer}/{discrepancy}: theta = {np.array2string(theta, precision=5)}"
              f", loss = {final:.6g}, converged = {converged}: {message}", flush=True)
    return FitResult(theta, final, history, info, res.losses, optimizer, discrepancy,
                     res.n_iter, converged, message, cov, sd, cov_message,
                     param_names=space.names, n=n, model=repr(model),
                     seed=seed_used if optimizer in STOCHASTIC else None,
                     newton_step=None if loc is None or not np.isfinite(loc.ratio)
                     else loc.ratio,
                     identifiability=None if loc is None else loc.lambda_min, tail_shape=xi,
                     warnings=notes, bounds=list(zip(space.lower, space.upper, strict=True)))


def _tail_warning(space, xi, heavy, n):
    m = int(min(0.2 * n, 3.0 * np.sqrt(n)))
    parts = ", ".join(f"{space.names[j]}: shape {xi[j]:.2f}, alpha ~ {1 / xi[j]:.2g}"
                      for j in heavy)
    return (f"the standard errors are not reliable: the per-point contributions to the "
            f"gradient in {', '.join(space.names[j] for j in heavy)} have a power-law tail "
            f"({parts}; generalised Pareto fit to the largest {m} of {n}, above {XI_WARN}), so "
            "their variance is likely infinite, or at this n dominated by a few points, and the "
            "asymptotic intervals need not cover (heavy-tailed data, a score unbounded where "
            "the data lie: score matching near the edge of the support, or a diffusion that "
            "grows fast)")


def _conclude(obj, space, res, optimizer, theta0, start, X, model, restart, nm_restart,
              loss_unit):
    """From the optimiser's result to the reported theta: the optimiser's own failures, then
    the polish (Newton) or restart, then the shape checks of :mod:`checks`."""
    theta = np.asarray(res.theta, dtype=np.float64)
    if res.excursion is not None:  # the best finite iterate: the average, else the last ones
        H = np.asarray(res.history)
        found = None
        for cand in [theta, *H[::-1][:5]]:
            v = _safe_value(obj, cand, None) if space.inside(cand) else None
            if v is not None:
                found = (np.array(cand), v)
                break
        if found is None:
            return _Outcome(np.array(theta0), start, False,
                            f"{res.message}; no finite loss near the end of the run: returning "
                            f"theta0{_checks.data_hint(X)}")
        if optimizer in STOCHASTIC or restart is None or obj.nonsmooth:
            return _Outcome(*found, False, res.message + _checks.data_hint(X))
        theta = found[0]  # a deterministic run: polish from its best finite iterate
    if not space.inside(theta):
        return _Outcome(np.array(theta0), start, False,
                        f"the optimiser left the parameter domain; {res.message}")
    try:
        loss = obj.value(theta)
    except _opt.NumericalExcursion as e:
        return _Outcome(np.array(theta0), start, False,
                        f"{res.message}; at the result: {e}; returning theta0")
    if optimizer in STOCHASTIC:
        if not loss <= start + 1e-8 * (1.0 + abs(start)):
            return _Outcome(theta, loss, False,
                            f"stalled where the loss ({loss:.6g}) is above its value at theta0 "
                            f"({start:.6g}): the steps overshot; lower lr")
        if np.all(res.history == theta0):
            return _Outcome(theta, loss, False,
                            "theta never moved from theta0: every step was rejected (it left "
                            "the parameter domain); lower lr")
    if obj.nonsmooth:
        return _conclude_nonsmooth(obj, space, res, theta, loss, X, model, nm_restart, theta0,
                                   loss_unit)
    pol = _verify.polish(obj, space, theta, loss, _verify.POLISH_ITERATIONS if restart else 0)
    path = list(pol.path)
    restarted = False
    if not pol.ok and optimizer != "closed_form" and restart is not None:
        best = pol.local.theta if pol.local.loss <= loss else theta
        r2 = restart(best)
        if r2.excursion is None and space.inside(r2.theta):
            l2 = _safe_value(obj, r2.theta, None)
            if l2 is not None:
                pol2 = _verify.polish(obj, space, r2.theta, l2)
                if pol2.ok or pol2.local.loss < pol.local.loss:
                    restarted, pol = True, pol2
                    path += [np.asarray(t) for t in r2.history[1:]] + list(pol2.path)
    loc = pol.local
    theta, loss = loc.theta, loc.loss
    if pol.ok:
        message = f"{res.message}; verified minimiser: the Newton step is " \
                  f"{loc.ratio:.1g} standard errors"
        if pol.path:
            message += (f", after {len(pol.path)} polishing Newton steps (the optimiser had "
                        f"stopped {pol.start_ratio:.3g} standard errors from the minimiser)")
        if restarted:
            message += "; reached by restarting once with L-BFGS-B"
    else:
        message = f"{res.message}; not a verified minimiser: {pol.reason}"
    converged = pol.ok
    ls = _loss_scale(loc, loss_unit)
    shape = (_checks.unbounded_towards_bound(space, theta, loss, obj.value, X, theta0, ls)
             or _checks.runaway(space, theta, loss, obj.value, ls))
    if shape is None and loc.sandwich is not None and loc.sandwich.hessian is not None:
        shape = _checks.kink(theta, loss, obj.value, loc.sandwich, None, space.names,
                             _scales(space, theta, _spread(X)), ls)
    singular = tuple(getattr(model, "singular_params", ()) or ())
    if shape is None and converged and singular:
        shape = _checks.unbounded_near_sample(X, theta, loss, obj.value, space.names, singular,
                                              ls)
    if shape is not None:
        converged, message = False, shape
    hint = _checks.data_hint(X)
    if not converged and hint and hint not in message:
        message += hint
    return _Outcome(theta, loss, converged, message, loc, tuple(path))


def _loss_scale(loc, loss_unit):
    """The change of the loss over one standard error (sum_j H_jj se_j^2 / 2), else the
    optimiser's loss unit: what the shape checks' tolerances are fractions of."""
    if loc is not None and loc.se is not None and loc.sandwich.hessian is not None:
        s = 0.5 * float(np.sum(np.diag(loc.sandwich.hessian) * loc.se**2))
        if s > 0 and math.isfinite(s):
            return s
    return abs(loss_unit)


def _scales(space, theta, unit):
    """Per parameter, the distance to its nearer bound, or the data's spread if unbounded."""
    out = np.full(theta.size, unit)
    for j in range(theta.size):
        d = [abs(theta[j] - e) for e in (space.lower[j], space.upper[j]) if e is not None]
        if d:
            out[j] = min(d)
    return out


def _conclude_nonsmooth(obj, space, res, theta, loss, X, model, nm_restart, theta0,
                        loss_unit):
    """No gradient to verify: the loss must not be improvable by a Nelder-Mead restart (a
    fresh simplex from theta; a restart that improves is taken, and a second must not)."""
    message, converged = res.message, res.converged
    path = []
    tol = 1e-10 * (abs(loss) + abs(loss_unit))
    for attempt in range(2 if nm_restart is not None else 0):
        r = nm_restart(theta, loss)
        v = None if r.excursion is not None else _safe_value(obj, r.theta, None)
        if v is None or not v < loss - tol:
            break
        path += [np.asarray(t) for t in r.history[1:]]
        theta, loss = np.asarray(r.theta), v
        if attempt == 1:
            converged = False
            message += ("; not a verified minimiser: Nelder-Mead restarts from the result keep "
                        "lowering the loss")
    if converged:
        message += "; verified: a Nelder-Mead restart from the result does not lower the loss"
    ls = abs(loss_unit)
    shape = (_checks.unbounded_towards_bound(space, theta, loss, obj.value, X, theta0, ls)
             or _checks.runaway(space, theta, loss, obj.value, ls))
    singular = tuple(getattr(model, "singular_params", ()) or ())
    if shape is None and converged and singular:
        shape = _checks.unbounded_near_sample(X, theta, loss, obj.value, space.names, singular,
                                              ls)
    if shape is not None:
        converged, message = False, shape
    loc = _verify.Local(theta, loss, obj.sandwich(theta))
    loc.reason = loc.sandwich.message
    return _Outcome(theta, loss, converged, message, loc, tuple(path))


def _safe_value(obj, theta, default):
    try:
        return obj.value(theta)
    except _opt.NumericalExcursion:
        return default


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

"""Optimisers for minimum Stein discrepancy estimators (Barp et al., 2019, Sec. 2.4).

All work on a host parameter vector theta (p small) and take callables, so they know nothing of
models or losses: ``grad(theta, batch) -> (loss, gradient)``, ``metric(theta, batch) -> (p, p)``.

- :func:`riemannian_sgd` — Eq. 16: theta <- theta - gamma g_hat(theta)^{-1} d_theta L_hat(batch),
  with the information tensor g_hat estimated on the same minibatch (Props. 3-4) and its
  eigenvalues floored at ``reg`` times the largest when it is (nearly) singular.
- :func:`sgd` — plain stochastic gradient descent with a constant step.

Both stochastic methods return the Polyak-Ruppert average of the second half of their iterates
and stop by :func:`stopping_rule` on that average. Every method stops at a
:class:`NumericalExcursion` of the objective and returns its best finite iterate.
- :func:`lbfgs` — scipy's L-BFGS-B on the full loss in unit-free :class:`Coordinates`: bounded
  parameters transformed (log for a scale, logistic for an interval), so an iterate never sits
  on a bound, and the loss divided by its magnitude at the start.
- :func:`nelder_mead` — derivative-free, for models whose score has a kink in theta.
- :func:`closed_form` — for losses that are quadratic in theta (exponential families with a
  theta-independent kernel and diffusion, Sec. 2.4): the gradient is affine, 2 A theta + c, so
  p + 1 gradients give A and c exactly and theta* solves 2 A theta = -c.

Steps that leave the parameter domain (a scale <= 0) are halved until they stay inside.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["riemannian_sgd", "sgd", "lbfgs", "nelder_mead", "closed_form", "regularised_inverse",
           "OptResult", "NumericalExcursion", "stopping_rule", "averaged_window", "Coordinates",
           "in_words"]


@dataclass
class OptResult:
    theta: np.ndarray
    history: np.ndarray  # (iterations + 1, p) parameter trajectory
    losses: list = field(default_factory=list)  # loss seen at each step (batch or full)
    n_iter: int = 0
    converged: bool = False
    message: str = ""
    excursion: object = None  # the NumericalExcursion that ended the run, if one did


def regularised_inverse(g: np.ndarray, reg: float = 1e-8) -> np.ndarray:
    """Inverse of the symmetrised g with eigenvalues floored at reg * max(eig, tiny)."""
    g = 0.5 * (g + g.T)
    w, Q = np.linalg.eigh(g)
    top = max(float(np.max(np.abs(w))), 1e-300)
    w = np.maximum(w, reg * top)
    return (Q / w) @ Q.T


def _stay_inside(theta, step, in_domain, max_halvings=60):
    if in_domain is None:
        return theta - step
    for _ in range(max_halvings):
        new = theta - step
        if in_domain(new):
            return new
        step = 0.5 * step
    return theta


class NumericalExcursion(Exception):
    """Raised by an objective when the loss, its gradient or the model's score is not finite
    (or overflows) at some theta; the optimisers stop and return their best finite iterate."""

    def __init__(self, theta, what: str):
        self.theta = np.array(theta, dtype=np.float64)
        self.what = what
        super().__init__(f"{what} at theta = {np.array2string(self.theta, precision=4)}")


#: Stopping rule of the stochastic optimisers (Polyak-Ruppert averaging): the averaged iterate
#: over the second half of the run is accepted when its Monte Carlo standard error (batch means
#: over :data:`N_BATCHES` batches) is at most MCSE_FRACTION, and the difference between the means
#: of the window's two halves at most DRIFT_FRACTION, of the tolerance (the statistical standard
#: error of the estimate when it is known, 1e-3 (1 + |theta|) otherwise).
MCSE_FRACTION = 0.2
DRIFT_FRACTION = 0.5
N_BATCHES = 8
#: The rule is checked every CHECK_EVERY steps from MIN_STEPS on (and at the last step).
MIN_STEPS = 200
CHECK_EVERY = 50


def averaged_window(hist):
    """The averaging window (second half of the trajectory, theta0 excluded) as an array."""
    H = np.asarray(hist)
    t = H.shape[0] - 1
    return H[1 + t // 2 :] if t >= 2 else H[-1:]


def stopping_rule(hist, tol):
    """``(converged, theta_bar, mcse, drift)`` of a stochastic run from its trajectory.

    theta_bar is the Polyak-Ruppert average over the second half of the run; mcse its batch
    means Monte Carlo standard error; drift the difference of the means of the window's halves.
    Converged iff mcse <= MCSE_FRACTION tol and |drift| <= DRIFT_FRACTION tol componentwise.
    """
    W = averaged_window(hist)
    bar = np.mean(W, axis=0)
    if W.shape[0] < 2 * N_BATCHES:
        return False, bar, np.full(bar.shape, np.inf), np.full(bar.shape, np.inf)
    L = W.shape[0] // N_BATCHES
    B = W[W.shape[0] - L * N_BATCHES :].reshape(N_BATCHES, L, -1).mean(axis=1)
    mcse = np.std(B, axis=0, ddof=1) / np.sqrt(N_BATCHES)
    h = W.shape[0] // 2
    drift = np.mean(W[h:], axis=0) - np.mean(W[:h], axis=0)
    tol = np.asarray(tol, dtype=np.float64)
    ok = bool(np.all(mcse <= MCSE_FRACTION * tol) and np.all(np.abs(drift) <= DRIFT_FRACTION * tol))
    return ok, bar, mcse, drift


def _default_tol(theta):
    return 1e-3 * (1.0 + np.abs(theta))


def _batches(n, batch_size, rng):
    if batch_size >= n:
        return None
    return np.sort(rng.choice(n, size=batch_size, replace=False))


def _stochastic(step, theta0, *, n, steps, batch_size, rng, in_domain, tolerance, callback):
    """The loop shared by :func:`riemannian_sgd` and :func:`sgd`: ``step(theta, batch)`` gives
    ``(minibatch loss, update)``; Polyak-Ruppert averaging and :func:`stopping_rule` checked
    every CHECK_EVERY steps from MIN_STEPS on; a :class:`NumericalExcursion` ends the run."""
    theta = np.array(theta0, dtype=np.float64)
    hist, losses = [theta.copy()], []
    tolerance = tolerance or _default_tol
    tol = None
    excursion = None
    ok, bar = False, theta.copy()
    mcse = drift = np.full(theta.shape, np.inf)
    for t in range(1, steps + 1):
        batch = _batches(n, batch_size, rng)
        try:
            val, upd = step(theta, batch)
        except NumericalExcursion as e:
            excursion = e
            break
        losses.append(val)
        theta = _stay_inside(theta, upd, in_domain)
        hist.append(theta.copy())
        if callback is not None:
            callback(t, theta.copy(), float(val))
        if t == steps or (t >= MIN_STEPS and t % CHECK_EVERY == 0):
            W = averaged_window(hist)
            if not np.all(np.isfinite(W)):
                excursion = NumericalExcursion(theta, "the iterate is not finite")
                break
            if tol is None or t == steps:
                try:
                    tol = np.asarray(tolerance(np.mean(W, axis=0)), dtype=np.float64)
                except NumericalExcursion:
                    tol = _default_tol(np.mean(W, axis=0))
            ok, bar, mcse, drift = stopping_rule(hist, tol)
            if ok:
                break
    n_iter = len(hist) - 1
    H = np.asarray(hist)
    if excursion is not None:
        finite = H[np.all(np.isfinite(H), axis=1)]
        W = averaged_window(finite)
        bar = np.mean(W, axis=0)
        msg = (f"stopped after {n_iter} of {steps} steps: {excursion}; lr too large, or the "
               "loss is unbounded in that direction")
        return OptResult(bar, H, losses, n_iter, False, msg, excursion=excursion)
    if ok:
        msg = (f"averaged iterate stable after {n_iter} steps (Monte Carlo standard error "
               f"{np.max(mcse / tol):.2g} x the tolerance)")
    elif not np.all(np.isfinite(mcse)):
        msg = (f"the stopping rule could not be checked: {steps} steps are too few (it averages "
               f"the second half of the run in {N_BATCHES} batches of at least 2); raise steps")
    else:
        msg = (f"the stopping rule did not hold after {steps} steps: the averaged iterate's "
               f"Monte Carlo standard error is {np.max(mcse / tol):.3g} x and its drift "
               f"{np.max(np.abs(drift) / tol):.3g} x the tolerance (statistical standard "
               "error); lower lr or raise steps")
    return OptResult(bar, H, losses, n_iter, ok, msg)


def riemannian_sgd(grad, metric, theta0, *, n, steps, lr, batch_size, rng, in_domain=None,
                   reg=1e-8, tolerance=None, callback=None) -> OptResult:
    """Stochastic Riemannian gradient descent (Eq. 16) with Polyak-Ruppert averaging.

    Constant step theta <- theta - lr g_hat^{-1} grad L_hat on minibatches; the returned theta
    is the average of the second half of the iterates, and the run stops once
    :func:`stopping_rule` accepts that average (``tolerance(theta) -> (p,)``: the statistical
    standard error). Cost per step: one loss gradient and one information tensor on the
    minibatch (O(b^2 d p) for DKSD, O(b d p^2) for DSM).
    """

    def step(theta, batch):
        val, g = grad(theta, batch)
        G = metric(theta, batch)
        return val, lr * (regularised_inverse(G, reg) @ g)

    return _stochastic(step, theta0, n=n, steps=steps, batch_size=batch_size, rng=rng,
                       in_domain=in_domain, tolerance=tolerance, callback=callback)


def sgd(grad, theta0, *, n, steps, lr, batch_size, rng, in_domain=None, tolerance=None,
        callback=None) -> OptResult:
    """Plain SGD with a constant step and Polyak-Ruppert averaging (see :func:`riemannian_sgd`
    for the averaging and the stopping rule); one minibatch gradient per step."""

    def step(theta, batch):
        val, g = grad(theta, batch)
        return val, lr * g

    return _stochastic(step, theta0, n=n, steps=steps, batch_size=batch_size, rng=rng,
                       in_domain=in_domain, tolerance=tolerance, callback=callback)


class Coordinates:
    """The unconstrained, unit-free coordinates phi the deterministic optimisers work in.

    A bounded parameter goes through its ``ParameterSpace`` (``stein_coreset.estimators.domains``)
    transform (log for a scale, logistic for an interval); an unbounded one is measured from its
    start in ``unit`` (the data's spread: a location moves in units of the sample's scale). With
    the loss divided by ``loss_unit`` (the norm of its phi-gradient at the start, or its
    magnitude there for Nelder-Mead), scipy's absolute tolerances and L-BFGS-B's first step
    (at most 1 in phi) mean the same on data in any units: the fit of 1000 X is 1000 times the
    fit of X.
    """

    def __init__(self, space, theta0, unit=1.0, loss_unit=1.0):
        self.space = space
        self.theta0 = np.array(theta0, dtype=np.float64)
        self.free = [j for j in range(self.theta0.size) if j not in space.transformed()]
        self.unit = float(unit) if np.isfinite(unit) and unit > 0 else 1.0
        self.loss_unit = float(loss_unit) if np.isfinite(loss_unit) and loss_unit > 0 else 1.0

    def to_phi(self, theta):
        phi = self.space.to_free(theta)
        phi[self.free] = (np.asarray(theta)[self.free] - self.theta0[self.free]) / self.unit
        return phi

    def to_theta(self, phi):
        theta = self.space.from_free(phi)
        theta[self.free] = self.theta0[self.free] + self.unit * np.asarray(phi)[self.free]
        return theta

    def chain(self, theta, g):
        """d/dphi from d/dtheta."""
        J = self.space.jacobian(theta)
        J[self.free] = self.unit
        return np.asarray(g, dtype=np.float64) * J

    def box(self, phi0, width=40.0):
        """L-BFGS-B bounds on phi: a transformed parameter stays within e^40 of its start (a
        step to scale = 0, which overflows the loss, is never tried); the others are free."""
        out = [(None, None)] * phi0.size
        for j in self.space.transformed():
            lo, hi = phi0[j] - width, phi0[j] + width
            if self.space.lower[j] is not None and self.space.upper[j] is not None:
                lo, hi = max(lo, -30.0), min(hi, 30.0)  # logistic: 1e-13 from either bound
            out[j] = (lo, hi)
        return out


class _Best:
    """The best finite full-data loss seen, and the first excursion."""

    def __init__(self):
        self.theta, self.value, self.excursion = None, np.inf, None

    def see(self, theta, val):
        if np.isfinite(val) and np.all(np.isfinite(theta)) and val < self.value:
            self.theta, self.value = np.array(theta, dtype=np.float64), float(val)


class _Stop(Exception):
    """Ends a scipy run at a :class:`NumericalExcursion` (recorded in the run's ``_Best``)."""


def _guarded(co: Coordinates, best: _Best, losses: list, evaluate):
    """``phi -> (theta, evaluate(theta))`` on the optimiser's scale ``phi``, the loss (the
    first item of ``evaluate``'s tuple) recorded in ``losses`` and ``best``; a non-finite
    parameter or a :class:`NumericalExcursion` is recorded in ``best`` and ends the run with
    :class:`_Stop`."""

    def fun(phi):
        t = co.to_theta(phi)
        try:
            if not np.all(np.isfinite(t)):
                raise NumericalExcursion(t, "the parameter overflowed")
            if not co.space.inside(t):
                raise NumericalExcursion(t, "the parameter reached the bound of its domain")
            out = evaluate(t)
        except NumericalExcursion as e:
            best.excursion = e
            raise _Stop from None
        losses.append(out[0])
        best.see(t, out[0])
        return t, out

    return fun


#: scipy's L-BFGS-B / Nelder-Mead messages, in words.
_SCIPY_WORDS = {
    "NORM OF PROJECTED GRADIENT": "its gradient fell below its tolerance",
    "RELATIVE REDUCTION OF F": "the loss stopped decreasing",
    "ABNORMAL": "its line search found no lower loss along the search direction",
    "TOTAL NO. OF ITERATIONS": "it reached the iteration limit (steps)",
    "TOTAL NO. of ITERATIONS": "it reached the iteration limit (steps)",
    "TOTAL NO. OF F,G EVALUATIONS": "it reached its limit of loss evaluations",
    "Maximum number of iterations": "it reached the iteration limit (steps)",
    "Maximum number of function evaluations": "it reached its limit of loss evaluations",
    "Optimization terminated successfully": "its simplex shrank below its tolerances",
}


def in_words(name: str, message: str) -> str:
    """``"L-BFGS-B stopped: the loss stopped decreasing"`` for scipy's terse messages."""
    for key, words in _SCIPY_WORDS.items():
        if key.lower() in message.lower():
            return f"{name} stopped: {words}"
    return f"{name} stopped: {message or 'no reason given'}"


def lbfgs(grad, theta0, *, steps, coords: Coordinates, gtol=1e-12, ftol=1e-13,
          callback=None) -> OptResult:
    """scipy L-BFGS-B on the full-data loss with its analytic (or FD) gradient, in the unit-free
    :class:`Coordinates` (bounded parameters transformed, the loss divided by its unit), so its
    tolerances do not depend on the units of X. A :class:`NumericalExcursion` of the objective
    (non-finite score, loss or gradient) ends the run: the best finite iterate is returned
    with ``converged=False`` and the excursion named. ``converged`` only says that L-BFGS-B's
    own test held; ``stein_coreset.estimators.verify`` decides whether theta is a minimiser.
    """
    from scipy.optimize import minimize

    co = coords
    best = _Best()
    hist, losses = [np.array(theta0, dtype=np.float64)], []
    guarded = _guarded(co, best, losses, lambda t: grad(t, None))

    def fun(phi):
        t, (val, g) = guarded(phi)
        return val / co.loss_unit, co.chain(t, g) / co.loss_unit

    def cb(phi):
        t = co.to_theta(phi)
        hist.append(t)
        if callback is not None:
            callback(len(hist) - 1, t.copy(), losses[-1] if losses else float("nan"))

    phi0 = co.to_phi(theta0)
    try:
        res = minimize(fun, phi0, jac=True, method="L-BFGS-B", callback=cb,
                       bounds=co.box(phi0),
                       options={"maxiter": int(steps), "gtol": gtol, "ftol": ftol})
    except _Stop:
        theta = best.theta if best.theta is not None else np.array(theta0, dtype=np.float64)
        hist.append(theta.copy())
        msg = (f"L-BFGS-B stopped after {len(hist) - 2} iterations: {best.excursion}; "
               "returning the best finite iterate")
        return OptResult(theta, np.asarray(hist), losses, len(hist) - 2, False, msg,
                         excursion=best.excursion)
    theta = co.to_theta(res.x)
    if not np.array_equal(hist[-1], theta):
        hist.append(theta.copy())
    ok = bool(res.success)
    msg = in_words("L-BFGS-B", str(res.message)) + f" after {int(res.nit)} iterations"
    if best.theta is not None and not best.value >= float(res.fun) * co.loss_unit:
        # a line search ended above a point it had visited
        theta, ok = best.theta, False
        msg += "; returning the best iterate seen"
    return OptResult(theta, np.asarray(hist), losses, int(res.nit), ok, msg)


def nelder_mead(value, theta0, *, steps, coords: Coordinates, xatol=1e-6, fatol=1e-12,
                callback=None) -> OptResult:
    """Derivative-free Nelder-Mead (scipy) on the full-data loss, for models whose score is not
    differentiable in theta (a kink at the location: the gradient of the loss misses the jumps
    of the score, Sec. 4.1). In the unit-free :class:`Coordinates`, as :func:`lbfgs` (a first
    simplex of 0.1 units); ``steps`` bounds the iterations (each a few loss evaluations,
    O(n^2 d) for DKSD)."""
    from scipy.optimize import minimize

    co = coords
    best = _Best()
    hist, losses = [np.array(theta0, dtype=np.float64)], []
    guarded = _guarded(co, best, losses, lambda t: (value(t),))

    def fun(phi):
        return guarded(phi)[1][0] / co.loss_unit

    def cb(phi):
        t = co.to_theta(phi)
        hist.append(t)
        if callback is not None:
            callback(len(hist) - 1, t.copy(), best.value)

    phi0 = co.to_phi(theta0)
    simplex = [phi0]
    for j in range(phi0.size):
        e = phi0.copy()
        e[j] += 0.1
        simplex.append(e)
    try:
        res = minimize(fun, phi0, method="Nelder-Mead", callback=cb, bounds=co.box(phi0),
                       options={"maxiter": int(steps), "xatol": xatol, "fatol": fatol,
                                "initial_simplex": np.asarray(simplex)})
    except _Stop:
        theta = best.theta if best.theta is not None else np.array(theta0, dtype=np.float64)
        hist.append(theta.copy())
        msg = f"Nelder-Mead stopped: {best.excursion}; returning the best finite iterate"
        return OptResult(theta, np.asarray(hist), losses, len(hist) - 2, False, msg,
                         excursion=best.excursion)
    theta = co.to_theta(res.x)
    if not np.array_equal(hist[-1], theta):
        hist.append(theta.copy())
    return OptResult(theta, np.asarray(hist), losses, int(res.nit), bool(res.success),
                     in_words("Nelder-Mead", str(res.message)))


def closed_form(grad, theta0) -> OptResult:
    """Minimiser of a convex quadratic loss from p + 1 exact gradients (Sec. 2.4).

    Raises ValueError if the recovered Hessian is not positive semi-definite (the loss is not a
    convex quadratic in theta) or is singular (theta is not identified by the data): judged on
    its correlation form D^-1/2 H D^-1/2 (D = diag H), which does not depend on the units of
    the parameters.
    """
    t0 = np.array(theta0, dtype=np.float64)
    p = t0.size
    v0, g0 = grad(t0, None)
    H = np.empty((p, p))
    for j in range(p):
        e = np.zeros(p)
        e[j] = 1.0
        H[:, j] = grad(t0 + e, None)[1] - g0
    H = 0.5 * (H + H.T)
    dg = np.diag(H)
    if np.any(dg < 0) or not np.all(np.isfinite(H)):
        raise ValueError(
            "closed_form: the loss is not a convex quadratic in theta here (Hessian diagonal "
            f"{dg}); use optimizer='lbfgs'")
    if np.any(dg == 0):
        j = int(np.flatnonzero(dg == 0)[0])
        raise ValueError(f"closed_form: the loss does not depend on theta[{j}]: theta is not "
                         "identified by the data")
    s = 1.0 / np.sqrt(dg)
    w, Q = np.linalg.eigh(H * s[:, None] * s[None, :])
    if w[0] < -1e-8:
        raise ValueError(
            "closed_form: the loss is not a convex quadratic in theta here (eigenvalues of the "
            f"Hessian's correlation form {w}); use optimizer='lbfgs'")
    if w[0] <= 1e-10:
        u = Q[:, 0] * s
        u = u / np.max(np.abs(u))
        raise ValueError(
            "closed_form: the quadratic is singular, so theta is not identified: the loss is "
            f"flat along the direction {np.array2string(u, precision=3)} of theta (collinear "
            "sufficient statistics?)")
    theta = t0 - np.linalg.solve(H, g0)
    return OptResult(theta, np.asarray([t0, theta]), [v0], 1, True, "closed form (exact)")

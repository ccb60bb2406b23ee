"""``converged`` means a verified minimiser: the checks every fit ends with, whatever optimiser
ran (Barp et al., 2019: the estimator is the minimiser of Eq. 4; Thms. 4 and 6 give its
standard error).

At the optimiser's result the gradient g and Hessian H of the full-data loss and the sandwich
standard errors se are formed (:func:`local`). The Newton step delta = H^-1 g is the distance to
the minimiser of the local quadratic model, and it is measured in standard errors: theta is
accepted when |delta_j| <= NEWTON_TOLERANCE se_j for every j, a criterion that does not depend on
the units of X or of theta. Before judging, :func:`polish` takes Newton steps with a backtracking
line search on the loss until |delta_j| <= POLISH_TOLERANCE se_j, so an optimiser that stopped
early (L-BFGS on a plateau of its own tolerance, a stochastic run's average) ends at the
minimiser of the sample loss. If that fails (no positive definite Hessian, no step that lowers
the loss), the fit restarts once from the best point seen (``fit`` runs L-BFGS-B from there) and
polishes again; if it still fails, ``converged`` is False and ``message`` says why.

H is also where identifiability shows: the eigenvalues of its correlation form
R = D^-1/2 H D^-1/2 (D = diag H) do not depend on the parameters' units, and the smallest,
lambda_min(R), is 1 - |correlation| of the two least separable estimates. Below SINGULAR the
loss is flat along a direction of theta (collinear statistics, a parameter the data do not
see): not converged, no standard error. Below NEAR_SINGULAR the estimate is reported with a
warning naming that direction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .optimize import NumericalExcursion

__all__ = ["Local", "local", "polish", "Polished", "NEWTON_TOLERANCE", "POLISH_TOLERANCE",
           "POLISH_ITERATIONS", "SINGULAR", "NEAR_SINGULAR", "STEP_FRACTION",
           "describe_direction"]

#: converged: the Newton step is at most this many standard errors in every coordinate.
NEWTON_TOLERANCE = 1e-2
#: polishing stops once the Newton step is at most this many standard errors.
POLISH_TOLERANCE = 1e-3
#: at most this many Newton steps per polish.
POLISH_ITERATIONS = 12
#: lambda_min of the Hessian's correlation form: below SINGULAR theta is not identified, below
#: NEAR_SINGULAR it is weakly identified (a correlation of the estimates beyond 0.999).
SINGULAR = 1e-8
NEAR_SINGULAR = 1e-3
#: central-difference steps of the Hessian once a standard error is known: this fraction of it.
STEP_FRACTION = 2e-2


@dataclass
class Local:
    """The local quadratic picture of the loss at theta.

    ``sandwich`` from :meth:`Objective.sandwich`; ``se`` (p,) or None; ``newton`` the Newton step
    H^-1 g (p,) or None; ``ratio`` max_j |newton_j| / se_j (inf when there is none);
    ``lambda_min`` and ``direction``: the smallest eigenvalue of the Hessian's correlation form
    and its eigenvector in theta's units (scaled to max 1); ``reason`` why theta cannot be a
    verified minimiser, or None.
    """

    theta: np.ndarray
    loss: float
    sandwich: object
    se: np.ndarray | None = None
    newton: np.ndarray | None = None
    ratio: float = np.inf
    lambda_min: float | None = None
    direction: np.ndarray | None = None
    reason: str | None = None


def _clip_steps(space, theta, steps):
    """Steps that keep theta +- step inside the open bounds (at most half the distance)."""
    h = np.array(steps, dtype=np.float64)
    for j in range(theta.size):
        for end in (space.lower[j], space.upper[j]):
            if end is not None:
                h[j] = min(h[j], 0.5 * abs(theta[j] - end))
    return h


def _default_steps(theta):
    return 1e-4 * np.maximum(1.0, np.abs(theta))


def local(obj, space, theta, loss, steps=None) -> Local:
    """The :class:`Local` picture at theta: one sandwich (4 p + 1 full-data passes)."""
    theta = np.asarray(theta, dtype=np.float64)
    h = _clip_steps(space, theta, _default_steps(theta) if steps is None else steps)
    try:
        sw = obj.sandwich(theta, h)
    except NumericalExcursion as e:
        return Local(theta, loss, None, reason=f"the sandwich at theta failed: {e}")
    out = Local(theta, loss, sw)
    H, g = sw.hessian, sw.gradient
    names = space.names
    if H is None or g is None:
        out.reason = sw.message
        return out
    dg = np.diag(H)
    flat = [j for j in range(theta.size) if not dg[j] > 0]
    if flat:
        j = flat[0]
        out.reason = (f"the loss has no positive curvature in {names[j]} at theta (Hessian "
                      f"entry {dg[j]:.3g}): theta is not a minimiser in {names[j]}, or "
                      f"{names[j]} is not identified by the data")
        out.lambda_min = 0.0
        return out
    s = 1.0 / np.sqrt(dg)
    w, Q = np.linalg.eigh(H * s[:, None] * s[None, :])
    u = Q[:, 0] * s
    out.lambda_min, out.direction = float(w[0]), u / np.max(np.abs(u))
    if abs(w[0]) <= SINGULAR:
        out.reason = (f"theta is not identified: the Hessian of the loss is singular along "
                      f"the direction {describe_direction(out.direction, names)} (smallest "
                      f"eigenvalue of its correlation form {w[0]:.2g}); the loss is flat there, "
                      "so no standard error exists (collinear statistics, or a parameter the "
                      "data do not see)")
        return out
    if sw.cov is None:
        out.reason = sw.message
        return out
    se = np.sqrt(np.maximum(np.diag(sw.cov), 0.0))
    out.se = se
    if not np.all(se > 0):
        j = int(np.flatnonzero(~(se > 0))[0])
        out.reason = (f"the per-point contributions to the gradient have no spread in "
                      f"{names[j]}, so its standard error is 0 and no step can be judged "
                      "against it (a sample with no spread?)")
        return out
    out.newton = np.linalg.solve(H, g)
    out.ratio = float(np.max(np.abs(out.newton) / se))
    return out


def describe_direction(u, names) -> str:
    """``(+1 loc -0.5 scale)``: a direction of theta in words."""
    terms = [f"{c:+.3g} {nm}" for c, nm in zip(u, names, strict=True) if abs(c) >= 1e-3]
    return "(" + " ".join(terms).lstrip("+") + ")"


@dataclass
class Polished:
    """The end of :func:`polish`: the final :class:`Local`, whether it is verified, the Newton
    steps taken (their iterates) and the ratio at the start."""

    local: Local
    ok: bool
    path: list = field(default_factory=list)
    start_ratio: float = np.inf

    @property
    def reason(self):
        return self.local.reason


def polish(obj, space, theta, loss, iterations=POLISH_ITERATIONS) -> Polished:
    """Newton steps with a backtracking line search on the full-data loss, from theta, until the
    step is at most POLISH_TOLERANCE standard errors (at most ``iterations`` steps, each one
    sandwich: 4 p + 1 passes, plus the line search's loss evaluations; 0: only the check).
    Verified when the last Newton step is at most NEWTON_TOLERANCE standard errors."""
    loc = local(obj, space, theta, loss)
    if loc.se is not None:  # again with steps on the scale of the standard error
        loc = local(obj, space, theta, loss, STEP_FRACTION * loc.se)
    start = loc.ratio
    path = []
    for _ in range(iterations):
        if loc.reason is not None or loc.ratio <= POLISH_TOLERANCE:
            break
        nxt = _line_search(obj, space, loc)
        if nxt is None:
            if loc.ratio > NEWTON_TOLERANCE:
                loc.reason = (
                    f"no step along the Newton direction lowers the loss (the Newton step is "
                    f"{loc.ratio:.3g} standard errors): the gradient does not describe the "
                    "loss near theta (a wrong score_dtheta, a kink, or rounding at the scale of "
                    "the data)")
            break
        theta, loss = nxt
        path.append(theta.copy())
        loc = local(obj, space, theta, loss, STEP_FRACTION * loc.se)
    if loc.reason is None and loc.ratio > NEWTON_TOLERANCE:
        loc.reason = (f"after {len(path)} Newton steps the next one is still {loc.ratio:.3g} "
                      "standard errors: theta is not yet at the minimiser")
    return Polished(loc, loc.reason is None, path, start)


def _line_search(obj, space, loc):
    """``(theta, loss)`` after the longest step theta - t delta (t = 1, 1/2, ...) that lowers
    the loss (Armijo, 1e-4); within one standard error of the minimiser, where the decrease can
    be below the loss's rounding, the full step is taken unless the loss rises by more than ten
    times the decrease the quadratic model predicts. None when no step is accepted."""
    delta = loc.newton
    pred = float(loc.sandwich.gradient @ delta)  # predicted first-order decrease, > 0 (H PD)
    t = 1.0
    for _ in range(40):
        cand = loc.theta - t * delta
        if space.inside(cand):
            try:
                v = obj.value(cand)
            except NumericalExcursion:
                v = None
            if v is not None:
                if v <= loc.loss - 1e-4 * t * pred:
                    return cand, v
                if t == 1.0 and loc.ratio <= 1.0 and v <= loc.loss + 10.0 * abs(pred) \
                        + 1e-12 * abs(loc.loss):
                    return cand, v
        t *= 0.5
    return None

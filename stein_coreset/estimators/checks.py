"""Shape checks of the loss around a fitted theta: the ways a stationary point can still not be
the minimiser a user should report (Barp et al., 2019, Sec. 4: runaway scales, kinks of
non-smooth models, losses unbounded below next to a sample point or towards a bound).

Each returns a message in words, or None. They probe the full-data loss ``value(theta)`` a few
times (the counts are in each docstring) and know nothing of optimisers. ``loss_scale`` is the
size of a meaningful change of the loss (``fit`` passes the change over one standard error),
so that their tolerances mean the same for data in any units; by default 1 + |loss|.
"""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from .optimize import NumericalExcursion

__all__ = ["runaway", "kink", "unbounded_near_sample", "unbounded_towards_bound", "data_hint"]


def _unit(final, loss_scale):
    return (1.0 + abs(final)) if loss_scale is None else abs(final) + loss_scale


def _probe(value, t):
    try:
        with np.errstate(all="ignore"):
            return value(t)
    except (NumericalExcursion, ValueError, ArithmeticError):
        return None


def runaway(space, theta, final, value, loss_scale=None):
    """A message when the loss does not rise as a parameter moves 10 and 1000 times further out
    (a scale multiplied away from its bound, a location moved away from 0): the minimiser may
    lie at infinity, or theta has run away along a plateau. Every such parameter is named.
    Parameters bounded on both sides cannot run away. Up to 2 p full-loss evaluations."""
    tol = 1e-8 * _unit(final, loss_scale)
    names = space.names
    found = []
    for j in range(theta.size):
        lo, hi = space.lower[j], space.upper[j]
        if lo is not None and hi is not None:
            continue
        vals = []
        for f in (10.0, 1000.0):
            t = np.array(theta, dtype=np.float64)
            if lo is not None:
                t[j] = lo + (theta[j] - lo) * f
            elif hi is not None:
                t[j] = hi - (hi - theta[j]) * f
            else:
                t[j] = theta[j] + np.copysign(f * (1.0 + abs(theta[j])), theta[j] or 1.0)
            v = _probe(value, t)
            if v is None:
                break
            vals.append(v)
        if len(vals) == 2 and vals[1] <= final + tol:
            found.append(f"{names[j]} ({final:.4g} at {names[j]} = {theta[j]:.4g}, "
                         f"{vals[0]:.4g} at 10x, {vals[1]:.4g} at 1000x further out)")
    if not found:
        return None
    who = " or ".join(f.split(" (")[0] for f in found)
    return (f"the loss does not rise as {'; nor as '.join(found)} runs away: it plateaus or "
            f"keeps decreasing, so {who} is not identified by this loss or its minimiser lies "
            "at infinity (a different diffusion m or kernel?)")


def kink(theta, final, value, sw, info, names, scales=None, loss_scale=None):
    """A message when the gradient misses a change of the loss near theta.

    Along the weakest direction u of the Hessian H (or of the information tensor when no
    Hessian was formed, which then only tests for a zero curvature) and along each
    coordinate, the loss at theta +- delta is compared with its quadratic model
    L + g delta + H delta^2 / 2 (g the gradient, 0 at a minimiser); delta is a quarter of the
    standard error, or where there is none 1e-2 of ``scales`` (per parameter: its distance to
    a bound, or the data's spread; default 1 + |theta_j|), and 1e-1 of it too where the
    curvature is zero (a loss that is piecewise constant in theta changes only where a sample
    point is crossed). A discrepancy of more than
    half the quadratic term (plus rounding) means the derivatives do not describe the loss:
    a kink in theta (the gradient is zero while the loss is not flat), or a loss that is flat
    and theta not identified. Up to 4 (p + 1) full-loss evaluations.
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
    tol = 1e-10 * _unit(final, loss_scale)
    sc = (1.0 + np.abs(theta)) if scales is None else np.asarray(scales, dtype=np.float64)
    probes = []
    for key, u in dirs:
        if cov is not None and key != "weak":
            probes.append((key, u, 0.25 * float(np.sqrt(cov[key, key]))))
            continue
        delta = 1e-2 / float(np.max(np.abs(u) / sc))  # each coordinate at most 1e-2 of scale
        probes.append((key, u, delta))
        if abs(0.5 * float(u @ H @ u)) * delta * delta <= tol:
            probes.append((key, u, 10.0 * delta))
    for key, u, delta in probes:
        quad = 0.5 * float(u @ H @ u) * delta * delta
        for sgn in (1.0, -1.0):
            v = _probe(value, theta + sgn * delta * u)
            if v is None:
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


def unbounded_near_sample(X, theta, final, value, names, singular, loss_scale=None):
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
            v = _probe(value, t)
            if v is not None and v < lowest[0]:
                lowest = (v, rel)
    on_point = gap[i] <= 1e-6 * unit
    if not (on_point or lowest[0] < final - 1e-6 * _unit(final, loss_scale)):
        return None
    where = (f"theta is {gap[i]:.2g} from the sample point {Xh[i].tolist()}" if on_point else
             f"{lowest[0]:.4g} with {', '.join(singular)} {lowest[1]:.0e} from the sample point "
             f"{Xh[i].tolist()}, against {final:.4g} at theta")
    return ("the loss is unbounded below next to every sample point (" + where + "): the "
            "score is singular at the location, so the sample loss has no minimiser and theta "
            "is a local minimum or a spike at a sample point, which depends on theta0 (a "
            "smoother model, or a robust estimate such as the median)")


def unbounded_towards_bound(space, theta, final, value, X=None, theta0=None,
                            loss_scale=None):
    """A message when the loss still decreases as a bounded parameter is moved 1000 times
    closer to one of its bounds (the fit of 2 or 3 points, or of constant data, whose loss
    tends to -inf as the scale tends to 0), or when theta sits on a bound (within 1e-12 of its
    distance at ``theta0``: where the optimisers' transforms stop). Up to two probes of the
    full loss per bounded parameter."""
    for j in range(theta.size):
        for end in (space.lower[j], space.upper[j]):
            if end is None:
                continue
            nm = space.names[j]
            t = np.array(theta, dtype=np.float64)
            t[j] = end + (theta[j] - end) * 1e-3
            on_bound = not space.inside(theta) or (
                theta0 is not None and abs(theta[j] - end) <= 1e-12 * abs(theta0[j] - end))
            v = None if on_bound else _probe(value, t)
            if on_bound or (v is not None and v < final - 1e-8 * _unit(final, loss_scale)):
                msg = (f"the loss keeps decreasing as {nm} approaches its bound {end:g} "
                       f"({final:.4g} at {nm} = {theta[j]:.4g}"
                       + ("" if v is None else f", {v:.4g} at {t[j]:.4g}") + "): it is "
                       "unbounded below, so theta is not a minimiser")
                return msg + (data_hint(X) or " (more data needed, or a model whose density "
                                             "vanishes at the bound?)")
    return None


def data_hint(X) -> str:
    """What in X can make a loss unbounded below or flat: too few points, no spread, or values
    whose squares over- or underflow ("" when none of these)."""
    if X is None:
        return ""
    Xh = aa.to_host(X)
    n = Xh.shape[0]
    if np.all(np.ptp(Xh, axis=0) == 0):
        return (f" (X has no spread: all {n} rows are equal, so nothing fixes a scale; the "
                "data, not the fit, are the problem)")
    if n <= 3:
        return f" (X has only {n} points)"
    s = float(np.max(np.abs(Xh))) if Xh.size else 0.0
    if s > 1e100 or 0 < s < 1e-100:
        return (f" (X's values reach {s:.3g}, where squares and reciprocal squares of the data "
                "over- or underflow: rescale X, e.g. divide it by its standard deviation, and "
                "the estimate back)")
    return ""

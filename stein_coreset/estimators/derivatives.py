"""The derivatives a Stein loss needs from a model, and their check against finite differences.

A model is any object with ``score(x, theta)`` = grad_x log p_theta(x), shape (n, d). It may also
give ``score_dtheta(x, theta)`` (d/dtheta grad_x log p, shape (n, d, p)) and
``score_dx(x, theta)`` (the Hessian of log p in x, shape (n, d, d)); :func:`score_dtheta` and
:func:`score_dx` fall back to central differences of ``score`` when they are missing (2 p, resp.
2 d, score evaluations on all points: O(n) work, never O(n^2)). A derivative the model does give
is checked once per fit against those differences (:func:`check_derivatives`): a wrong one would
move the estimate and its standard error without any other sign.
"""

from __future__ import annotations

import array_api_compat
import numpy as np

from .. import _array_api as aa

__all__ = ["model_call", "score_dtheta", "score_dx", "fd_jacobian_x", "n_params",
           "check_derivatives", "FD_X", "FD_THETA", "DERIVATIVE_RTOL"]

FD_THETA = 1e-5  # relative central-difference step in theta
FD_X = 6e-6  # relative central-difference step in x (about eps^(1/3))
#: A model's own derivative must agree with central differences of its score to this relative
#: accuracy (the differences are good to ~1e-8 on smooth scores; see :func:`check_derivatives`).
DERIVATIVE_RTOL = 1e-4


def _xp(x):
    return aa.namespace(x=x)


def model_call(model, name: str, x, theta):
    """``model.<name>(x, theta)`` (``score``, ``score_dtheta``, ``score_dx``), refused unless
    it is an array of x's namespace: ``TypeError`` naming the method and what it returned
    (before: ``AttributeError: 'list' object has no attribute 'shape'`` for a list, None or a
    tuple, deep inside the loss)."""
    out = getattr(model, name)(x, theta)
    if array_api_compat.is_array_api_obj(out):
        try:
            same = aa.namespace(x=x, out=out)[0] is aa.namespace(x=x)[0]
        except (TypeError, ValueError):
            same = False
        if same:
            return out
        kind = f"an array of another namespace or device ({type(out).__module__}." \
               f"{type(out).__name__})"
    else:
        kind = "None" if out is None else f"a {type(out).__name__}"
    xp, _ = _xp(x)
    fix = "" if out is None else "; convert it with xp.asarray"
    raise TypeError(
        f"model.{name}(x, theta) must return an array of x's namespace "
        f"({getattr(xp, '__name__', xp)}), got {kind}{fix}"
    )


def _theta_steps(theta):
    return FD_THETA * np.maximum(1.0, np.abs(theta))


def fd_score_dtheta(model, x, theta):
    """Central differences of ``model.score`` in theta, (n, d, p)."""
    xp, _ = _xp(x)
    theta = np.asarray(theta, dtype=np.float64)
    h = _theta_steps(theta)
    cols = []
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h[j]
        cols.append((model_call(model, "score", x, theta + e)
                     - model_call(model, "score", x, theta - e)) / (2.0 * float(h[j])))
    return xp.stack(cols, axis=2)


def score_dtheta(model, x, theta):
    """d/dtheta of the score, (n, d, p): ``model.score_dtheta`` or central differences of score."""
    if getattr(model, "score_dtheta", None) is not None:
        return model_call(model, "score_dtheta", x, theta)
    return fd_score_dtheta(model, x, theta)


def score_dx(model, x, theta):
    """Hessian of log p in x, (n, d, d): ``model.score_dx`` or central differences of score."""
    if getattr(model, "score_dx", None) is not None:
        return model_call(model, "score_dx", x, theta)
    return fd_jacobian_x(lambda z: model_call(model, "score", z, theta), x)


def fd_jacobian_x(f, x):
    """Central-difference Jacobian of a per-point map f: (n, d) -> (n, k); returns (n, k, d)."""
    xp, dev = _xp(x)
    n, d = x.shape
    cols = []
    for j in range(d):
        h = FD_X * (1.0 + xp.abs(x[:, j]))
        e = xp.zeros((1, d), dtype=xp.float64, device=dev)
        e = xp.where(xp.arange(d, device=dev)[None, :] == j, 1.0, e)
        step = h[:, None] * e
        fp, fm = f(x + step), f(x - step)
        shape = (n,) + (1,) * (fp.ndim - 1)
        cols.append((fp - fm) / (2.0 * xp.reshape(h, shape)))
    return xp.stack(cols, axis=-1)


def n_params(model, theta=None) -> int:
    """The number of free parameters: ``model.n_params`` or the length of ``theta``."""
    p = getattr(model, "n_params", None)
    if p is not None:
        return int(p)
    if theta is None:
        raise ValueError("the model does not say how many parameters it has; give theta0")
    return int(np.asarray(theta).size)


def _rows(X, rows):
    n = int(X.shape[0])
    if n <= rows:
        return X
    xp, dev = _xp(X)
    idx = np.unique(np.linspace(0, n - 1, rows).round().astype(np.int64))
    return xp.take(X, aa.as_index_array(xp, idx, dev), axis=0)


def _row_errors(given, fd, floor):
    """Per row and column (last axis): |given - fd| over its tolerance (DERIVATIVE_RTOL of the
    larger magnitude plus 1e-8 of the column's RMS plus ``floor``, a thousand times the
    differences' rounding noise); above 1 is a disagreement."""
    n = given.shape[0]
    G = np.reshape(given, (n, -1, given.shape[-1]))
    F = np.reshape(fd, (n, -1, fd.shape[-1]))
    rms = np.sqrt(np.mean(F * F, axis=(0, 1)))
    tol = DERIVATIVE_RTOL * np.maximum(np.abs(G), np.abs(F)) + 1e-8 * rms + floor + 1e-300
    return np.max(np.abs(G - F) / tol, axis=1), np.max(np.abs(G - F) / (np.abs(F) + 1e-300),
                                                       axis=1)


def _mismatch(given, fds, names, floor):
    """The first column where ``given`` disagrees with every one of the central differences
    ``fds`` (several step sizes: a correct derivative agrees at one of them, whatever the scale
    of x and theta) on more than a few rows, as ``(name, relative error, rows)``, or None.
    Isolated rows (a point within a step of a kink) are forgiven: more than 2 rows and 5% of
    them must disagree."""
    n = given.shape[0]
    if not fds:
        return None
    errs = [_row_errors(given, fd, floor) for fd in fds]
    score = np.minimum.reduce([e[0] for e in errs])
    rel = np.minimum.reduce([e[1] for e in errs])
    for j in range(score.shape[1]):
        bad = score[:, j] > 1.0
        if int(bad.sum()) > max(2, 0.05 * n):
            return names[j], float(np.max(rel[bad, j])), int(bad.sum())
    return None


def _fd_theta_at(model, x, theta, h):
    cols = []
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h[j]
        cols.append((model_call(model, "score", x, theta + e)
                     - model_call(model, "score", x, theta - e)) / (2.0 * float(h[j])))
    return np.stack([np.asarray(aa.to_host(c)) for c in cols], axis=2)


def _fd_x_at(model, x, theta, rel, floor):
    xh = np.asarray(aa.to_host(x), dtype=np.float64)
    n, d = xh.shape
    cols = []
    for j in range(d):
        h = rel * (floor + np.abs(xh[:, j]))
        h = np.where(h > 0, h, rel)
        step = np.zeros_like(xh)
        step[:, j] = h
        fp = aa.to_host(model_call(model, "score", aa.from_host(xh + step, like=x), theta))
        fm = aa.to_host(model_call(model, "score", aa.from_host(xh - step, like=x), theta))
        cols.append((np.asarray(fp) - np.asarray(fm)) / (2.0 * h[:, None]))
    return np.stack(cols, axis=-1)


def _theta_step_sets(theta, bounds):
    """Candidate step vectors, each kept at most half-way to a parameter's bounds."""
    a = np.abs(theta)
    sets = [FD_THETA * np.maximum(1.0, a), 1e-3 * np.maximum(1.0, a)]
    if np.all(a > 0):
        sets += [FD_THETA * a, 1e-3 * a]
    for h in sets:
        for j, pair in enumerate(bounds or []):
            for end in pair:
                if end is not None:
                    h[j] = min(h[j], 0.5 * abs(theta[j] - end))
    return [h for h in sets if np.all(h > 0)]


def _each(make, candidates):
    """``make(c)`` for each candidate, skipping those where the model fails (a step that left
    the model's own domain)."""
    out = []
    for c in candidates:
        try:
            out.append(make(c))
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            continue
    return out


def check_derivatives(model, X, theta, param_names, rows: int = 64, bounds=None) -> None:
    """Compare the model's own ``score_dtheta`` / ``score_dx`` with central differences of its
    ``score`` at theta on up to ``rows`` evenly spaced rows of X; ValueError naming the
    derivative, its entry and the size of the disagreement when they differ.

    The differences are taken at a few step sizes (relative to max(1, |theta_j|) and to
    |theta_j|; to 1 + |x| and to |x|), so that a correct derivative agrees at one of them on
    data of any scale (``bounds``: the parameters' open intervals, which no step crosses).
    Cost: up to 8 p + 6 d score evaluations on ``rows`` points. Models
    without those methods use the differences themselves and are not checked.
    """
    has_dtheta = callable(getattr(model, "score_dtheta", None))
    has_dx = callable(getattr(model, "score_dx", None))
    if not (has_dtheta or has_dx):
        return
    Xs = _rows(X, rows)
    theta = np.asarray(theta, dtype=np.float64)
    n, d = int(Xs.shape[0]), int(Xs.shape[1])
    where = f"at theta0 = {np.array2string(theta, precision=4)}"
    with np.errstate(all="ignore"):
        S = np.asarray(aa.to_host(model_call(model, "score", Xs, theta)), dtype=np.float64)
        s_rms = float(np.sqrt(np.mean(S * S))) if np.all(np.isfinite(S)) else 0.0
        x_rms = float(np.sqrt(np.mean(np.asarray(aa.to_host(Xs), dtype=np.float64) ** 2)))
    with np.errstate(all="ignore"):
        if has_dtheta:
            given = np.asarray(aa.to_host(model_call(model, "score_dtheta", Xs, theta)),
                               dtype=np.float64)
            want = (n, d, theta.size)
            if given.shape != want:
                raise ValueError(f"model.score_dtheta must return shape {want} (n, d, p), got "
                                 f"{given.shape}")
            fds = _each(lambda h: _fd_theta_at(model, Xs, theta, h),
                        _theta_step_sets(theta, bounds))
            floor = 2e-8 * s_rms / np.maximum(1.0, np.abs(theta))
            bad = _mismatch(given, fds, list(param_names), floor)
            if bad is not None:
                raise ValueError(
                    f"model.score_dtheta does not match central differences of model.score in "
                    f"{bad[0]} {where}: relative error {bad[1]:.3g} or more on {bad[2]} of {n} "
                    "rows checked; fix score_dtheta (or delete it: the differences are then "
                    "used)")
        if has_dx:
            given = np.asarray(aa.to_host(model_call(model, "score_dx", Xs, theta)),
                               dtype=np.float64)
            if given.shape != (n, d, d):
                raise ValueError(f"model.score_dx must return shape {(n, d, d)} (n, d, d), got "
                                 f"{given.shape}")
            fds = _each(lambda c: _fd_x_at(model, Xs, theta, *c),
                        ((FD_X, 1.0), (FD_X, 0.0), (1e-3, 0.0)))
            bad = _mismatch(given, fds, [f"x[{j}]" for j in range(d)],
                            4e-8 * s_rms / (1.0 + x_rms))
            if bad is not None:
                raise ValueError(
                    f"model.score_dx does not match central differences of model.score in "
                    f"{bad[0]} {where}: relative error {bad[1]:.3g} or more on {bad[2]} of {n} "
                    "rows checked; fix score_dx (or delete it: the differences are then used)")

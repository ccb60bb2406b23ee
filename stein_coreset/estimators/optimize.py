"""Optimisers for minimum Stein discrepancy estimators (Barp et al., 2019, Sec. 2.4).

All work on a host parameter vector theta (p small) and take callables, so they know nothing of
models or losses: ``grad(theta, batch) -> (loss, gradient)``, ``metric(theta, batch) -> (p, p)``.

- :func:`riemannian_sgd` — Eq. 16: theta <- theta - gamma g_hat(theta)^{-1} d_theta L_hat(batch),
  with the information tensor g_hat estimated on the same minibatch (Props. 3-4) and its
  eigenvalues floored at ``reg`` times the largest when it is (nearly) singular.
- :func:`sgd` — plain stochastic gradient descent with a constant step.
- :func:`lbfgs` — scipy's L-BFGS-B on the full loss, bounds from the model's domain.
- :func:`closed_form` — for losses that are quadratic in theta (exponential families with a
  theta-independent kernel and diffusion, Sec. 2.4): the gradient is affine, 2 A theta + c, so
  p + 1 gradients give A and c exactly and theta* solves 2 A theta = -c.

Steps that leave the parameter domain (a scale <= 0) are halved until they stay inside.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["riemannian_sgd", "sgd", "lbfgs", "closed_form", "regularised_inverse", "OptResult"]


@dataclass
class OptResult:
    theta: np.ndarray
    history: np.ndarray  # (iterations + 1, p) parameter trajectory
    losses: list = field(default_factory=list)  # loss seen at each step (batch or full)
    n_iter: int = 0
    converged: bool = False
    message: str = ""


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


#: An SGD run has converged when its parameter moved less than this, relative to 1 + |theta|,
#: over the last :data:`STATIONARY_WINDOW` steps (all iterates and losses finite).
STATIONARY_RTOL = 1e-2
STATIONARY_WINDOW = 10


def _sgd_outcome(hist, losses, steps):
    """(converged, message) of a constant-step SGD run from its trajectory."""
    H = np.asarray(hist)
    if not (np.all(np.isfinite(H)) and np.all(np.isfinite(np.asarray(losses, dtype=float)))):
        return False, "diverged: the parameter or the loss became NaN or inf (lr too large?)"
    tail = H[-min(len(H), STATIONARY_WINDOW + 1) :]
    spread = float(np.max(np.abs(tail - tail[-1])))
    scale = 1.0 + float(np.max(np.abs(tail[-1])))
    if spread <= STATIONARY_RTOL * scale:
        return True, f"stationary over the last {len(tail) - 1} of {steps} steps"
    return False, (
        f"not stationary after {steps} steps: theta moved {spread:.3g} (relative "
        f"{spread / scale:.3g}) over the last {len(tail) - 1}; lower lr or raise steps"
    )


def _diverged(theta, val) -> bool:
    return not (np.all(np.isfinite(theta)) and np.isfinite(val))


def _batches(n, batch_size, steps, rng):
    for _ in range(steps):
        if batch_size >= n:
            yield None
        else:
            yield np.sort(rng.choice(n, size=batch_size, replace=False))


def riemannian_sgd(grad, metric, theta0, *, n, steps, lr, batch_size, rng, in_domain=None,
                   reg=1e-8) -> OptResult:
    """Stochastic Riemannian gradient descent, Eq. 16. Cost per step: one loss gradient and one
    information tensor on the minibatch (O(b^2 d p) for DKSD, O(b d p^2) for DSM)."""
    theta = np.array(theta0, dtype=np.float64)
    hist, losses = [theta.copy()], []
    for batch in _batches(n, batch_size, steps, rng):
        val, g = grad(theta, batch)
        losses.append(val)
        if _diverged(g, val):
            break
        G = metric(theta, batch)
        theta = _stay_inside(theta, lr * (regularised_inverse(G, reg) @ g), in_domain)
        hist.append(theta.copy())
    return OptResult(theta, np.asarray(hist), losses, len(losses),
                     *_sgd_outcome(hist, losses, len(losses)))


def sgd(grad, theta0, *, n, steps, lr, batch_size, rng, in_domain=None) -> OptResult:
    """Plain SGD with a constant step size; one minibatch gradient per step."""
    theta = np.array(theta0, dtype=np.float64)
    hist, losses = [theta.copy()], []
    for batch in _batches(n, batch_size, steps, rng):
        val, g = grad(theta, batch)
        losses.append(val)
        if _diverged(g, val):
            break
        theta = _stay_inside(theta, lr * g, in_domain)
        hist.append(theta.copy())
    return OptResult(theta, np.asarray(hist), losses, len(losses),
                     *_sgd_outcome(hist, losses, len(losses)))


def lbfgs(grad, theta0, *, steps, bounds=None, gtol=1e-10, ftol=1e-12) -> OptResult:
    """scipy L-BFGS-B on the full-data loss with its analytic (or FD) gradient."""
    from scipy.optimize import minimize

    hist, losses = [np.array(theta0, dtype=np.float64)], []

    def fun(t):
        val, g = grad(np.asarray(t, dtype=np.float64), None)
        losses.append(val)
        return val, np.asarray(g, dtype=np.float64)

    res = minimize(
        fun,
        np.asarray(theta0, dtype=np.float64),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        callback=lambda t: hist.append(np.array(t, dtype=np.float64)),
        options={"maxiter": int(steps), "gtol": gtol, "ftol": ftol},
    )
    theta = np.asarray(res.x, dtype=np.float64)
    if not np.array_equal(hist[-1], theta):
        hist.append(theta.copy())
    return OptResult(theta, np.asarray(hist), losses, int(res.nit), bool(res.success),
                     str(res.message))


def closed_form(grad, theta0) -> OptResult:
    """Minimiser of a convex quadratic loss from p + 1 exact gradients (Sec. 2.4).

    Raises ValueError if the recovered Hessian is not positive semi-definite (the loss is not a
    convex quadratic in theta) or is singular (theta is not identified by the data).
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
    w = np.linalg.eigvalsh(H)
    scale = max(float(np.max(np.abs(w))), 1e-300)
    if w[0] < -1e-8 * scale:
        raise ValueError(
            "closed_form: the loss is not a convex quadratic in theta here (Hessian eigenvalues "
            f"{w}); use optimizer='lbfgs'"
        )
    if w[0] <= 1e-13 * scale:
        raise ValueError("closed_form: the quadratic is singular; theta is not identified")
    theta = t0 - np.linalg.solve(H, g0)
    return OptResult(theta, np.asarray([t0, theta]), [v0], 1, True, "closed form")

"""Asymptotic covariance of minimum Stein discrepancy estimators (Barp et al., 2019, Thms. 4, 6).

For a loss that is a U-statistic of order 2, L_n(theta) = sum_{i != j} k0_theta(x_i, x_j) /
(n (n - 1)) (KSD, DKSD), the Hoeffding projection of its gradient is

    grad L_n(theta) - mu(theta) ~ (2 / n) sum_i (h(x_i) - mu(theta)),  h(x) = E_y grad k0(x, y),

so sqrt(n) grad L_n(theta*) -> N(0, 4 Var h) and, with H the Hessian of the loss at theta*,

    sqrt(n) (theta_hat - theta*) -> N(0, H^{-1} 4 Var[h(x)] H^{-1})

(Thm. 4; in the well-specified case H = 2 g with g the information tensor, giving the paper's
g^{-1} Sigma g^{-1}). For the mean losses SM / DSM / NNSM, L_n = mean F_theta(x_i) and the same
holds with Var[grad F] in place of 4 Var h (Thm. 6). On the sample: the per-sample contributions

    c_i = (2 / (n - 1)) grad_theta R_i(theta), R_i = sum_{j != i} k0_theta(x_i, x_j)  (KSD, DKSD)
    c_i = grad_theta F_theta(x_i)                                          (SM, DSM, NNSM)

(central differences of the row sums R_i, which one pass gives, see
:func:`stein_coreset.estimators.dksd.row_sums`), Sigma_hat their empirical covariance, H_hat the
Hessian of L_n by central differences of its gradient, and cov = H_hat^{-1} Sigma_hat
H_hat^{-1} / n: the sandwich, valid under misspecification too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _array_api as aa
from . import dksd as _dksd
from . import losses as _losses
from . import score_matching as _sm
from .diffusion import nn_diffusion

__all__ = ["Sandwich", "sandwich", "per_sample_contributions", "hessian"]


@dataclass
class Sandwich:
    """cov (p, p) or None; contributions (n, p); hessian (p, p); gradient (p,) of the loss (the
    analytic gradient for KSD / DKSD, the contributions' mean for the score matching family);
    message says why cov is None."""

    cov: np.ndarray | None
    contributions: np.ndarray | None
    hessian: np.ndarray | None
    message: str
    gradient: np.ndarray | None = None


def _steps(theta, rel):
    return rel * np.maximum(1.0, np.abs(theta))


def _per_point(model, X, theta, discrepancy, kernel, diff, n_threads):
    """The per-sample statistic whose theta-gradient is c_i: 2 R_i / (n - 1) or F_theta(x_i)."""
    n = int(X.shape[0])
    if discrepancy in _losses.KERNEL_BASED:
        return _dksd.row_sums(model, X, theta, kernel, diff if discrepancy == "dksd" else None,
                              n_threads=n_threads) * (2.0 / (n - 1))
    if discrepancy == "nnsm" and diff is None:
        diff = nn_diffusion()
    scale = 0.5 if discrepancy == "sm" else 1.0
    return scale * np.asarray(aa.to_host(_sm.dsm_terms(model, X, theta,
                                                       None if discrepancy == "sm" else diff)))


def per_sample_contributions(model, X, theta, discrepancy, kernel, diff, n_threads=1,
                             steps=None):
    """c_i of the module docstring, (n, p) host: 2 p evaluations of the per-point statistic
    (O(n^2 d) each for KSD / DKSD, O(n d^2) for the score matching family). ``steps``: the
    central-difference step per parameter (default 1e-5 max(1, |theta_j|))."""
    theta = np.asarray(theta, dtype=np.float64)
    h = _steps(theta, 1e-5) if steps is None else np.asarray(steps, dtype=np.float64)
    cols = []
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h[j]
        fp = _per_point(model, X, theta + e, discrepancy, kernel, diff, n_threads)
        fm = _per_point(model, X, theta - e, discrepancy, kernel, diff, n_threads)
        cols.append((fp - fm) / (2.0 * h[j]))
    return np.stack(cols, axis=1)


def hessian(grad, theta, steps=None):
    """Symmetrised central-difference Jacobian of ``grad(theta) -> (p,)`` (2 p gradients);
    ``steps`` per parameter, default 1e-4 max(1, |theta_j|)."""
    theta = np.asarray(theta, dtype=np.float64)
    h = _steps(theta, 1e-4) if steps is None else np.asarray(steps, dtype=np.float64)
    H = np.empty((theta.size, theta.size))
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h[j]
        H[:, j] = (np.asarray(grad(theta + e)) - np.asarray(grad(theta - e))) / (2.0 * h[j])
    return 0.5 * (H + H.T)


def sandwich(model, X, theta, discrepancy, kernel, diff, n_threads=1, steps=None) -> Sandwich:
    """The sandwich covariance H^{-1} Sigma H^{-1} / n of theta_hat (Thms. 4 and 6).

    Cost: 2 p per-point passes and 2 p + 1 gradients (4 p + 1 pair passes, O(n^2 d) each, for
    KSD / DKSD). ``steps``: the Hessian's central-difference step per parameter (the
    contributions take a tenth of it); ``stein_coreset.estimators.verify`` passes a
    fraction of the standard error, so that both are the same on data in any units. ``cov``
    is None, with the reason in ``message``, when the Hessian is not positive definite (theta
    is not a strict local minimiser, or the loss is not smooth there).
    """
    theta = np.asarray(theta, dtype=np.float64)
    n = int(X.shape[0])
    h_c = None if steps is None else 0.1 * np.asarray(steps, dtype=np.float64)
    with np.errstate(all="ignore"):
        C = per_sample_contributions(model, X, theta, discrepancy, kernel, diff, n_threads, h_c)
        if discrepancy in _losses.KERNEL_BASED:
            def grad(t):
                return _losses.evaluate_with_grad(model, X, t, discrepancy, kernel, diff,
                                                  "analytic", n_threads=n_threads)[1]
            g = np.asarray(grad(theta), dtype=np.float64)
        else:
            def grad(t):
                return np.mean(per_sample_contributions(model, X, t, discrepancy, kernel, diff,
                                                        n_threads, h_c), axis=0)
            g = np.mean(C, axis=0)
        H = hessian(grad, theta, steps)
    if not (np.all(np.isfinite(C)) and np.all(np.isfinite(H)) and np.all(np.isfinite(g))):
        return Sandwich(None, None, None, "the per-sample gradients or the Hessian are not "
                        "finite at theta")
    w = np.linalg.eigvalsh(H)
    top = float(np.max(np.abs(w)))
    if not (top > 0 and w[0] > 1e-8 * top):
        return Sandwich(None, C, H, "the Hessian of the loss at theta is not positive definite "
                        f"(eigenvalues {np.array2string(w, precision=3)}): theta is not a strict "
                        "local minimiser, or the loss is not smooth there", g)
    Sigma = np.cov(C, rowvar=False, bias=True).reshape(theta.size, theta.size)
    Hinv = np.linalg.inv(H)
    cov = Hinv @ Sigma @ Hinv / n
    return Sandwich(0.5 * (cov + cov.T), C, H, "asymptotic sandwich covariance (Thms. 4, 6)", g)

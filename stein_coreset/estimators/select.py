"""``select_lengthscale``: compare kernel lengthscales of a KSD / DKSD fit by held-out loss."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from ..kernels import IMQ, RadialKernel, median_bandwidth
from . import losses as _losses
from .fit import fit

__all__ = ["select_lengthscale", "LengthscaleSelection", "DEFAULT_FACTORS", "CRITERIA"]

#: Default candidates: these multiples of the median-heuristic bandwidth of X.
DEFAULT_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
CRITERIA = ("reference", "sm")
_RESERVED = ("model", "X", "discrepancy", "kernel", "diffusion")


@dataclass
class LengthscaleSelection:
    """Result of :func:`select_lengthscale`.

    Attributes
    ----------
    lengthscale : float, the chosen lengthscale; ``kernel`` the fitting kernel with it.
    lengthscales : (L,) numpy array, the candidates, in the order given.
    scores : (L,) numpy array, the held-out criterion averaged over the folds (smaller is
        better; inf where a fit failed).
    score_se : (L,) numpy array, its standard error over the folds.
    paired_se : (L,) numpy array, the standard error over the folds of the difference to the
        chosen candidate (folds paired: the fold-to-fold noise that all candidates share
        cancels); a difference of a few of these is one the data resolve.
    fold_scores : (L, n_splits) numpy array.
    n_converged : (L,) numpy int array, the folds whose fit reported ``converged``.
    criterion : str. n_splits : int.
    reference_lengthscale : float or None, the yardstick kernel's bandwidth ("reference").
    message : str, how the choice was made.

    See Also
    --------
    select_lengthscale : returns it.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> X = model.sample(150, [0.0, 1.0], np.random.default_rng(0))
    >>> sel = est.select_lengthscale(model, X, [0.01, 1.0, 100.0], n_splits=3)
    >>> sel.lengthscales.tolist(), sel.fold_scores.shape
    ([0.01, 1.0, 100.0], (3, 3))
    """

    lengthscale: float
    kernel: RadialKernel
    lengthscales: np.ndarray
    scores: np.ndarray
    score_se: np.ndarray
    paired_se: np.ndarray
    fold_scores: np.ndarray
    n_converged: np.ndarray
    criterion: str
    n_splits: int
    reference_lengthscale: float | None = None
    message: str = ""
    fit_messages: list = field(default_factory=list, repr=False)

    def table(self) -> str:
        """The comparison as a text table, the chosen row marked with ``*``."""
        rows = [f"{'lengthscale':>12s} {'held-out ' + self.criterion:>20s} {'se':>9s} "
                f"{'paired se':>9s} {'converged':>9s}"]
        for j, ell in enumerate(self.lengthscales):
            mark = " *" if ell == self.lengthscale else ""
            rows.append(f"{ell:12.4g} {self.scores[j]:20.6g} {self.score_se[j]:9.3g} "
                        f"{self.paired_se[j]:9.3g} {self.n_converged[j]:>5d}/{self.n_splits}"
                        f"{mark}")
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.table()


def select_lengthscale(model, X, lengthscales=None, *, discrepancy: str = "ksd", kernel=None,
                       diffusion=None, criterion: str = "reference", n_splits: int = 5,
                       seed=0, fit_kwargs: dict | None = None) -> LengthscaleSelection:
    """Compare kernel lengthscales of a KSD / DKSD fit by K-fold held-out loss.

    For each candidate lengthscale and each of ``n_splits`` folds (a fixed-seed random split
    of the rows), theta is fitted on the other folds with :func:`fit` and judged on the
    held-out fold; the candidate with the smallest mean held-out criterion is chosen, among
    those whose fits all converged when there are any.

    The criterion is the same for every candidate, so the numbers are comparable. The fitting
    loss itself is not: the scale of a KSD / DKSD loss depends on the kernel (a flat kernel
    gives small losses whatever theta), so the held-out fitting losses of two lengthscales say
    nothing about which theta is better. Two comparable yardsticks:

    ``"reference"`` (default)
        The held-out ``discrepancy`` (the same diffusion) of the fitted theta under one fixed
        *reference* kernel: the kernel family at the median-heuristic bandwidth of the full X.
        It estimates the squared Stein discrepancy between the held-out data and p_theta, so
        for a well-specified model its excess over the optimum is about
        (theta - theta*)^T g_ref (theta - theta*): the estimator's mean squared error in the
        reference information metric, which rewards the efficient lengthscale; it keeps the
        diffusion, so a robust DKSD is still judged robustly. It works for every model ``fit``
        does. Under misspecification it leans towards the reference lengthscale.
    ``"sm"``
        The held-out score-matching loss ``mean(Delta log p_theta + |grad log p_theta|^2 / 2)``,
        which uses no kernel at all: it estimates the Fisher divergence of p_theta from the
        data up to a constant. It needs a score smooth in x (refused for models with
        ``nonsmooth_params``, whose Laplacian is unbounded at the location) and, like SM,
        is not robust: with outliers it favours the theta that fits them.

    For rough models (``SymmetricBessel`` with s < (d + 1) / 2) every held-out loss is noisy:
    the score is singular at the location, and a held-out point close to the fitted location
    dominates the fold's value.

    Parameters
    ----------
    model : model object, as for :func:`fit`.
    X : (n, d) array or array-like, the sample.
    lengthscales : sequence of positive floats, optional
        Candidates; default ``DEFAULT_FACTORS`` = (0.1, 0.3, 1, 3, 10) times the median
        heuristic bandwidth of X (:func:`stein_coreset.median_bandwidth`), the
        default of :func:`fit`.
    discrepancy : {"ksd", "dksd"}
        The kernel-based loss to fit (SM / DSM / NNSM use no kernel).
    kernel : RadialKernel, optional
        The kernel family, e.g. ``sc.Gaussian(sigma=1.0)``: its ``sigma`` is replaced by each
        candidate (``kernel.with_sigma``). Default IMQ (beta = -1/2), as in :func:`fit`.
    diffusion : as in :func:`fit`.
    criterion : {"reference", "sm"}, see above.
    n_splits : int
        Folds (>= 2, each of at least 2 rows). Cost: ``len(lengthscales) * n_splits`` fits on
        (n_splits - 1) / n_splits of the rows, plus as many held-out evaluations (O(n^2 d / K)
        each for "reference", O(n d^2 / K) for "sm").
    seed : int or numpy Generator
        The split of the rows (fixed by default, so a rerun gives the same table).
    fit_kwargs : dict, optional
        Further arguments of :func:`fit`; default ``optimizer="lbfgs"`` (``"nelder_mead"`` for
        a model with ``nonsmooth_params``) and ``stderr=False``.

    Returns
    -------
    LengthscaleSelection
        ``lengthscale`` and ``kernel`` (the chosen one), the per-candidate table
        (``scores``, ``score_se``, ``paired_se``, ``n_converged``; ``print(result)`` shows
        it). The rule is the plain minimum: when the others are within a couple of
        ``paired_se`` of it, the data do not prefer one lengthscale.

    See Also
    --------
    fit : the fit run on each fold.
    LengthscaleSelection : the result.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> X = model.sample(150, [0.0, 1.0], np.random.default_rng(0))
    >>> sel = est.select_lengthscale(model, X, [0.01, 1.0, 100.0], n_splits=3)
    >>> bool(sel.lengthscale < 100.0), sel.n_converged.tolist()  # 100: the scale is lost
    (True, [3, 3, 0])
    """
    (X,) = aa.as_arrays(X=X)
    xp, dev = aa.namespace(X=X)
    X = val.check_points(X, xp, "X")
    n = int(X.shape[0])
    val.check_choice(discrepancy, "discrepancy", _losses.KERNEL_BASED)
    val.check_choice(criterion, "criterion", CRITERIA)
    n_splits = val.check_int(n_splits, "n_splits", lo=2)
    if 2 * n_splits > n:
        raise ValueError(f"n_splits must be at most n / 2 = {n // 2} (each fold needs 2 rows), "
                         f"got {n_splits}")
    if kernel is None:
        kernel = IMQ(sigma=1.0)
    if not isinstance(kernel, RadialKernel):
        raise TypeError("kernel must be a base kernel such as sc.IMQ or sc.Gaussian (its sigma "
                        f"is the lengthscale compared), got {type(kernel).__name__}")
    fit_kwargs = dict(fit_kwargs or {})
    clash = [k for k in _RESERVED if k in fit_kwargs]
    if clash:
        raise TypeError(f"fit_kwargs must not set {', '.join(clash)}: they are arguments of "
                        "select_lengthscale")
    nonsmooth = tuple(getattr(model, "nonsmooth_params", ()) or ())
    if criterion == "sm" and nonsmooth:
        raise ValueError(f"criterion='sm' needs a score smooth in x, but {model!r} is not "
                         f"differentiable in {', '.join(nonsmooth)}; use criterion='reference'")
    fit_kwargs.setdefault("optimizer", "nelder_mead" if nonsmooth else "lbfgs")
    fit_kwargs.setdefault("stderr", False)
    _losses.check_model_dimension(model, X)
    scale = None
    if lengthscales is None or criterion == "reference":
        scale = median_bandwidth(X)
    if lengthscales is None:
        ells = scale * np.asarray(DEFAULT_FACTORS)
    else:
        ells = np.asarray(lengthscales, dtype=np.float64).reshape(-1) \
            if not np.isscalar(lengthscales) else np.array([float(lengthscales)])
        if ells.size == 0:
            raise ValueError("lengthscales must hold at least one value")
        if not np.all(np.isfinite(ells) & (ells > 0)):
            raise ValueError(f"lengthscales must be positive and finite, got {ells.tolist()}")
    reference = kernel.with_sigma(scale) if criterion == "reference" else None

    order = val.check_random_state(seed).permutation(n)
    folds = np.array_split(order, n_splits)
    scores = np.full((ells.size, n_splits), np.inf)
    n_conv = np.zeros(ells.size, dtype=np.int64)
    messages = []
    for k, held in enumerate(folds):
        train = np.setdiff1d(order, held)
        X_tr = xp.take(X, aa.as_index_array(xp, train, dev), axis=0)
        X_va = xp.take(X, aa.as_index_array(xp, np.sort(held), dev), axis=0)
        for j, ell in enumerate(ells):
            try:
                f = fit(model, X_tr, discrepancy=discrepancy, kernel=kernel.with_sigma(ell),
                        diffusion=diffusion, **fit_kwargs)
            except ValueError as e:  # e.g. the loss overflows at theta0 for a tiny lengthscale
                messages.append(f"lengthscale {ell:.4g}, fold {k}: {e}")
                continue
            if f.converged:
                n_conv[j] += 1
            else:
                messages.append(f"lengthscale {ell:.4g}, fold {k}: {f.message}")
            scores[j, k] = _held_out(model, f.theta, X_va, criterion, discrepancy, reference,
                                     diffusion)
    mean = scores.mean(axis=1)
    se = scores.std(axis=1, ddof=1) / math.sqrt(n_splits)
    finite = np.isfinite(mean)
    if not np.any(finite):
        raise ValueError("no lengthscale gave a finite held-out criterion; the fits said: "
                         + "; ".join(messages[:3]))
    ok = finite & (n_conv == n_splits)
    pool = ok if np.any(ok) else finite
    best = int(np.flatnonzero(pool)[np.argmin(mean[pool])])
    message = (f"smallest mean held-out {criterion} over {n_splits} folds"
               + (" among the candidates whose fits all converged" if np.any(ok) and
                  not np.all(ok[finite]) else "")
               + ("" if np.any(ok) else " (no candidate converged on every fold: use with care)"))
    with np.errstate(invalid="ignore"):
        paired = (scores - scores[best]).std(axis=1, ddof=1) / math.sqrt(n_splits)
    return LengthscaleSelection(float(ells[best]), kernel.with_sigma(float(ells[best])), ells,
                                mean, se, paired, scores, n_conv, criterion, n_splits,
                                None if reference is None else float(scale), message, messages)


def _held_out(model, theta, X_va, criterion, discrepancy, reference, diffusion):
    """The criterion on the held-out fold; inf where it is not finite."""
    try:
        with np.errstate(all="ignore"):
            if criterion == "sm":
                v = _losses.loss(model, theta, X_va, discrepancy="sm")
            else:
                v = _losses.loss(model, theta, X_va, discrepancy=discrepancy, kernel=reference,
                                 diffusion=diffusion)
    except (ValueError, ArithmeticError):
        return np.inf
    return float(v) if math.isfinite(v) else np.inf

"""What a fit returns: :class:`FitResult`, its summary table, and the warnings a fit can give.

Modelled on statsmodels' results: named ``params``, ``stderr`` (statsmodels' ``bse``),
``conf_int(alpha)`` and ``summary()``, with a short ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from ..diagnostics import DiagnosticWarning

__all__ = ["FitResult", "Summary", "StandardErrorWarning", "IdentifiabilityWarning"]


class StandardErrorWarning(DiagnosticWarning):
    """The sandwich standard error of a fit is not reliable: the per-point contributions to it
    have so heavy a tail that their variance is likely infinite, or at the sample's size
    dominated by a few points (see ``stein_coreset.estimators.tails``).

    See Also
    --------
    fit : issues it; ``FitResult.tail_shape`` has the figures.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> X = np.random.default_rng(0).standard_cauchy((500, 1))
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     f = est.fit(est.Gaussian(), X, discrepancy="sm", optimizer="lbfgs")
    >>> any(issubclass(x.category, est.StandardErrorWarning) for x in w)
    True
    """


class IdentifiabilityWarning(DiagnosticWarning):
    """The estimates of two or more parameters are nearly collinear: the Hessian of the loss is
    close to singular along a direction of theta, so they are weakly identified by the data.

    See Also
    --------
    fit : issues it; ``FitResult.identifiability`` has the smallest eigenvalue of the
        Hessian's correlation form.

    Examples
    --------
    >>> from stein_coreset import estimators as est
    >>> issubclass(est.IdentifiabilityWarning, UserWarning)
    True
    """


def _fmt(v, width=10):
    if v is None or not np.isfinite(v):
        return f"{'n/a':>{width}}"
    return f"{v:>{width}.4g}"


class Summary:
    """The table :meth:`FitResult.summary` returns: ``str()`` (or :meth:`as_text`) prints it;
    ``rows`` holds the per-parameter entries and ``info`` the fit's."""

    def __init__(self, result, alpha=0.05):
        self.alpha = alpha
        r = result
        try:
            ci = r.conf_int(alpha)
        except ValueError:
            ci = np.full((r.theta.size, 2), np.nan)
        se = r.stderr if r.stderr is not None else np.full(r.theta.size, np.nan)
        self.rows = [dict(name=nm, estimate=float(r.theta[j]), stderr=float(se[j]),
                          lower=float(ci[j, 0]), upper=float(ci[j, 1]))
                     for j, nm in enumerate(r.param_names)]
        self.info = dict(model=r.model, discrepancy=r.discrepancy, n=r.n,
                         optimizer=r.optimizer_description, converged=r.converged,
                         loss=r.loss, message=r.message, stderr=r.cov_message,
                         warnings=list(r.warnings), newton_step=r.newton_step,
                         identifiability=r.identifiability)

    def as_text(self) -> str:
        lo, hi = self.alpha / 2, 1 - self.alpha / 2
        w = max([len(row["name"]) for row in self.rows] + [12])
        head = (f"{'':<{w}} {'estimate':>12} {'std err':>12} {f'[{lo:g}':>12} "
                f"{f'{hi:g}]':>12}")
        rule = "=" * max(len(head), 72)
        i = self.info
        check = []
        if i["newton_step"] is not None:
            check.append(f"Newton step {i['newton_step']:.1g} se")
        if i["identifiability"] is not None:
            check.append(f"min eig. of the Hessian's correlation form "
                         f"{i['identifiability']:.2g}")
        lines = [rule, "Minimum Stein discrepancy estimate".center(len(rule)), rule,
                 f"model:       {i['model']}",
                 f"discrepancy: {i['discrepancy']:<14} n: {i['n']:<10} loss: {i['loss']:.6g}",
                 f"optimizer:   {i['optimizer']}",
                 f"converged:   {i['converged']}" + (f" ({', '.join(check)})" if check else ""),
                 rule, head, "-" * len(rule)]
        for row in self.rows:
            lines.append(f"{row['name']:<{w}} {_fmt(row['estimate'], 12)} "
                         f"{_fmt(row['stderr'], 12)} {_fmt(row['lower'], 12)} "
                         f"{_fmt(row['upper'], 12)}")
        lines.append(rule)
        notes = [("fit", i["message"]), ("stderr", i["stderr"])]
        notes += [("warning", m) for m in i["warnings"]]
        for key, text in notes:
            lines.extend(_wrap(f"{key}: {text}", len(rule)))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.as_text()

    __repr__ = __str__


def _wrap(text, width):
    import textwrap

    return textwrap.wrap(text, width=width, subsequent_indent="  ")


@dataclass(repr=False)
class FitResult:
    """Result of :func:`fit`, read like a statsmodels result.

    Attributes
    ----------
    theta : (p,) numpy array, the estimate, in the order of ``param_names``.
    params : dict, ``{name: estimate}`` (names from the model's ``param_names``).
    stderr : (p,) numpy array or None, the asymptotic standard errors sqrt(diag(cov)).
    cov : (p, p) numpy array or None
        The sandwich covariance H^{-1} Sigma H^{-1} / n of ``theta`` (Thms. 4 and 6, see
        ``stein_coreset.estimators.inference``): H the Hessian of the loss, Sigma the
        covariance of the per-sample gradient contributions (the U-statistic's Hoeffding
        projection for KSD / DKSD). It is asymptotic: it assumes n large, theta a minimiser and
        those contributions of finite variance, which ``fit`` checks
        (:class:`StandardErrorWarning` when their tail is too heavy). None where it does not
        apply, with the reason in ``cov_message``.
    loss : float, the full-data loss at ``theta``.
    converged : bool
        True only at a verified minimiser (see ``stein_coreset.estimators.verify``);
        ``message`` says what the optimiser did and how theta was verified, or why not.
    history : (iterations + 1, p) numpy array, the parameter trajectory (theta0 first, the
        polishing Newton steps last).
    information : (p, p) numpy array, the information tensor g(theta) (Props. 3-4) on the data.
    losses : list of the losses seen along the way (minibatch losses for the SGD methods).
    optimizer, discrepancy : str. n_iter : int (the optimiser's iterations). n : int.
    seed : int or None, the seed of a stochastic optimiser (None for a deterministic one, or a
        Generator that was passed).
    newton_step : float or None, the last Newton step in standard errors (max over theta).
    identifiability : float or None, the smallest eigenvalue of the Hessian's correlation form
        (1 - the largest absolute correlation of two estimates, roughly); 0 for an unidentified
        theta.
    tail_shape : (p,) numpy array or None, the generalised Pareto shape of each parameter's
        per-point contributions (their variance is infinite above 1/2).
    warnings : list of str, what was warned about.
    bounds : list of (lower, upper), the parameters' open intervals (None: unbounded).

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
    >>> {k: round(v, 4) for k, v in f.params.items()}, np.round(f.stderr, 4)
    ({'loc': 0.4284, 'scale': 2.0356}, array([0.1175, 0.0838]))
    >>> np.round(f.conf_int(0.05), 3)
    array([[0.198, 0.659],
           [1.871, 2.2  ]])
    >>> f
    FitResult(sm, lbfgs, n=300, converged=True, params={'loc': 0.4284, 'scale': 2.036})
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
    param_names: tuple = ()
    n: int = 0
    model: str = ""
    seed: int | None = None
    newton_step: float | None = None
    identifiability: float | None = None
    tail_shape: np.ndarray | None = None
    warnings: list = field(default_factory=list)
    bounds: list = field(default_factory=list)

    def __post_init__(self):
        if len(self.param_names) != self.theta.size:
            self.param_names = tuple(f"theta[{j}]" for j in range(self.theta.size))

    @property
    def params(self) -> dict:
        """``{name: estimate}`` in the order of ``param_names``."""
        return {nm: float(v) for nm, v in zip(self.param_names, self.theta, strict=True)}

    @property
    def optimizer_description(self) -> str:
        if self.optimizer in ("riemannian_sgd", "sgd"):
            seed = "a Generator passed as seed" if self.seed is None else f"seed {self.seed}"
            return f"{self.optimizer} (stochastic, {seed}), {self.n_iter} iterations"
        return f"{self.optimizer} (deterministic), {self.n_iter} iterations"

    def conf_int(self, alpha: float = 0.05) -> np.ndarray:
        """Asymptotic (Wald) intervals theta_j -+ z_(1 - alpha/2) stderr_j, (p, 2).

        They rest on the sandwich's normal approximation (Thms. 4 and 6); an end beyond a
        parameter's bound is moved to the bound. ValueError when there is no standard error
        (``cov_message`` says why) or alpha is not in (0, 1).
        """
        if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
            raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
        if self.stderr is None:
            raise ValueError(f"no standard errors for this fit: {self.cov_message}")
        z = NormalDist().inv_cdf(1 - alpha / 2)
        lo, hi = self.theta - z * self.stderr, self.theta + z * self.stderr
        for j, (a, b) in enumerate(self.bounds or []):
            if a is not None:
                lo[j] = max(lo[j], a)
            if b is not None:
                hi[j] = min(hi[j], b)
        return np.stack([lo, hi], axis=1)

    def summary(self, alpha: float = 0.05) -> Summary:
        """The table: estimate, standard error and interval per parameter; the model,
        discrepancy, n, optimiser, convergence and what was checked or warned about."""
        return Summary(self, alpha)

    def __repr__(self) -> str:
        ps = ", ".join(f"{k!r}: {v:.4g}" for k, v in list(self.params.items())[:6])
        more = ", ..." if self.theta.size > 6 else ""
        return (f"FitResult({self.discrepancy}, {self.optimizer}, n={self.n}, "
                f"converged={self.converged}, params={{{ps}{more}}})")

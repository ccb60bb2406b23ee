"""``SteinEstimator``: :func:`fit` as a scikit-learn style estimator object."""

from __future__ import annotations

import inspect

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from ..kernels import IMQ, SteinKernel, median_bandwidth
from . import losses as _losses
from .fit import fit as _fit

__all__ = ["SteinEstimator", "NotFittedError"]


class NotFittedError(ValueError, AttributeError):
    """A fitted attribute or ``score`` was asked for before ``fit`` (as scikit-learn's).

    See Also
    --------
    SteinEstimator : the estimator that raises it.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> X = model.sample(300, [0.5, 2.0], np.random.default_rng(0))
    >>> try:
    ...     est.SteinEstimator(model).score(X)
    ... except est.NotFittedError as e:
    ...     print(e)
    this SteinEstimator is not fitted yet; call fit(X) first
    """


class SteinEstimator:
    """Minimum Stein discrepancy estimator with the scikit-learn interface.

    A thin wrapper of :func:`stein_coreset.estimators.fit` (Barp et al., 2019, Eq. 4): the
    constructor stores the arguments unchanged, ``fit(X)`` runs :func:`fit` and sets the
    attributes ending in ``_``; ``get_params`` / ``set_params`` work as in scikit-learn (so
    ``sklearn.base.clone`` and grid searches over ``kernel`` or ``diffusion`` work), without
    scikit-learn being a dependency.

    Parameters
    ----------
    model, discrepancy, kernel, diffusion, optimizer, theta0, steps, batch_size, lr, seed,
    stderr, polish
        As in :func:`fit` (same defaults).

    Attributes
    ----------
    theta_ : (p,) numpy array
        The estimate.
    params_ : dict
        ``{name: estimate}``, as ``FitResult.params``.
    stderr_, cov_ : numpy arrays or None
        As ``FitResult.stderr`` / ``cov`` (None where they do not apply); asymptotic.
    converged_ : bool
        As ``FitResult.converged``.
    result_ : FitResult
        The result of :func:`fit`.
    kernel_ : kernel
        The kernel used, with a data-dependent bandwidth fixed on the X given to ``fit``
        (the median heuristic when ``kernel`` is None), so ``score`` uses the same one.
    n_features_in_ : int
        d.

    See Also
    --------
    fit : the function it wraps.
    select_lengthscale : cross-validated choice of the kernel's lengthscale.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset import estimators as est
    >>> model = est.Gaussian(d=1)
    >>> X = model.sample(300, [0.5, 2.0], np.random.default_rng(0))
    >>> m = est.SteinEstimator(model, discrepancy="sm", optimizer="lbfgs").fit(X)
    >>> m.theta_.shape, bool(m.score(X) > m.score(X + 5.0))
    ((2,), True)
    >>> list(m.params_), m.conf_int().shape
    (['loc', 'scale'], (2, 2))
    """

    def __init__(self, model, discrepancy: str = "dksd", kernel=None, diffusion=None,
                 optimizer: str = "riemannian_sgd", theta0=None, steps: int = 500,
                 batch_size: int | None = None, lr: float | None = None, seed=None,
                 stderr: bool = True, polish: bool = True):
        self.model = model
        self.discrepancy = discrepancy
        self.kernel = kernel
        self.diffusion = diffusion
        self.optimizer = optimizer
        self.theta0 = theta0
        self.steps = steps
        self.batch_size = batch_size
        self.lr = lr
        self.seed = seed
        self.stderr = stderr
        self.polish = polish

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's arguments, {name: value}."""
        return {k: getattr(self, k) for k in self._param_names()}

    def set_params(self, **params):
        """Set constructor arguments; an unknown name raises ValueError. Returns self."""
        names = self._param_names()
        for k, v in params.items():
            if k not in names:
                raise ValueError(f"invalid parameter {k!r} for SteinEstimator; valid: "
                                 f"{', '.join(names)}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        sig = inspect.signature(type(self).__init__).parameters
        args = [repr(self.model)] + [
            f"{k}={getattr(self, k)!r}" for k in self._param_names()[1:]
            if getattr(self, k) is not sig[k].default]
        return f"SteinEstimator({', '.join(args)})"

    def fit(self, X, y=None):
        """Estimate theta on X ((n, d) array or array-like) with :func:`fit`; ``y`` is
        ignored (scikit-learn's convention). Returns self."""
        (X,) = aa.as_arrays(X=X)
        xp, _ = aa.namespace(X=X)
        X = val.check_points(X, xp, "X")
        kernel = self.kernel
        if self.discrepancy in _losses.KERNEL_BASED:
            if kernel is None:
                kernel = IMQ(sigma=median_bandwidth(X))
            elif isinstance(kernel, SteinKernel):
                kernel = kernel.resolve(X)
        res = _fit(self.model, X, discrepancy=self.discrepancy, kernel=kernel,
                   diffusion=self.diffusion, optimizer=self.optimizer, theta0=self.theta0,
                   steps=self.steps, batch_size=self.batch_size, lr=self.lr, seed=self.seed,
                   stderr=self.stderr, polish=self.polish)
        self.result_ = res
        self.theta_ = res.theta
        self.params_ = res.params
        self.stderr_ = res.stderr
        self.cov_ = res.cov
        self.converged_ = res.converged
        self.kernel_ = kernel
        self.n_features_in_ = int(X.shape[1])
        return self

    def _fitted(self):
        if not hasattr(self, "result_"):
            raise NotFittedError("this SteinEstimator is not fitted yet; call fit(X) first")
        return self.result_

    def conf_int(self, alpha: float = 0.05) -> np.ndarray:
        """Asymptotic intervals of the fitted parameters, (p, 2): ``FitResult.conf_int``."""
        return self._fitted().conf_int(alpha)

    def summary(self, alpha: float = 0.05):
        """The fit's table (estimate, stderr, interval, discrepancy, n, optimiser,
        convergence): ``FitResult.summary``."""
        return self._fitted().summary(alpha)

    def score(self, X, y=None) -> float:
        """Minus the loss of the fitted theta on X (greater is better, scikit-learn's
        convention), with the kernel fixed at ``fit``. O(n^2 d) for KSD / DKSD, O(n d^2) for
        the score-matching losses. Only comparable between estimators with the same
        discrepancy, kernel and diffusion."""
        if not hasattr(self, "theta_"):
            raise NotFittedError("this SteinEstimator is not fitted yet; call fit(X) first")
        (X,) = aa.as_arrays(X=X)
        return -float(_losses.loss(self.model, np.asarray(self.theta_), X,
                                   discrepancy=self.discrepancy, kernel=self.kernel_,
                                   diffusion=self.diffusion))

"""The loss of one fit as functions of theta alone, for the optimisers and the checks.

:class:`Objective` binds a model, a validated sample, a discrepancy, a kernel and a diffusion;
its ``value``, ``grad``, ``metric`` and ``sandwich`` are the full-data (or minibatch) loss, its
theta-gradient, the information tensor (Props. 3-4) and the sandwich covariance (Thms. 4, 6).
A score, loss or gradient that is NaN or inf at some theta, or an arithmetic error there,
becomes a :class:`~stein_coreset.estimators.optimize.NumericalExcursion` naming what happened,
so an optimiser can stop with its best finite iterate instead of raising.
"""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from . import inference as _inference
from . import losses as _losses
from .optimize import NumericalExcursion

__all__ = ["Objective"]


class Objective:
    """The loss of (model, X, discrepancy, kernel, diffusion) as a function of theta.

    ``started`` turns True once the loss was evaluated at theta0 without error: before that a
    ValueError (a bad model, a bad diffusion) propagates; after it, any ValueError at a theta
    the optimiser chose is an excursion, since the data were validated.
    """

    def __init__(self, model, X, discrepancy, kernel, diff, gradient="analytic", n_threads=1,
                 nonsmooth=()):
        self.model, self.X, self.discrepancy = model, X, discrepancy
        self.kernel, self.diff, self.gradient = kernel, diff, gradient
        self.n_threads, self.nonsmooth = n_threads, tuple(nonsmooth)
        self.xp, self.device = aa.namespace(X=X)
        self.n = int(X.shape[0])
        self.started = False

    def take(self, batch):
        if batch is None:
            return self.X
        return self.xp.take(self.X, aa.as_index_array(self.xp, batch, self.device), axis=0)

    def guarded(self, theta, what, call, check=True):
        """``call()``; a non-finite result or an arithmetic error at theta becomes a
        :class:`NumericalExcursion`."""
        try:
            with np.errstate(all="ignore"):
                out = call()
        except (OverflowError, ZeroDivisionError, FloatingPointError) as e:
            raise NumericalExcursion(theta, f"the {what} overflowed ({type(e).__name__})") \
                from None
        except ValueError as e:
            if not self.started:
                raise
            raise NumericalExcursion(theta, str(e).split(" for theta")[0].split(" at theta")[0]) \
                from None
        parts = out if isinstance(out, tuple) else (out,)
        for v in parts if check else ():
            if v is None:
                continue
            a = np.asarray(aa.to_host(v) if not isinstance(v, (float, int)) else v,
                           dtype=np.float64)
            if not np.all(np.isfinite(a)):
                raise NumericalExcursion(theta, f"the {what} is NaN or inf")
        return out

    def value(self, theta) -> float:
        """The full-data loss."""
        return self.guarded(theta, f"{self.discrepancy} loss", lambda: _losses.evaluate(
            self.model, self.X, theta, self.discrepancy, self.kernel, self.diff,
            n_threads=self.n_threads))

    def grad(self, theta, batch=None):
        """``(loss, (p,) gradient)`` on the minibatch ``batch`` (row indices) or all of X."""
        return self.guarded(theta, f"{self.discrepancy} loss or its gradient",
                            lambda: _losses.evaluate_with_grad(
                                self.model, self.take(batch), theta, self.discrepancy,
                                self.kernel, self.diff, self.gradient,
                                n_threads=self.n_threads))

    def metric(self, theta, batch=None):
        """The information tensor g(theta) (Props. 3-4) on the minibatch or all of X."""
        return self.guarded(theta, "information tensor", lambda: _losses.information_tensor(
            self.model, self.take(batch), theta, self.discrepancy, self.kernel, self.diff))

    def sandwich(self, theta, steps=None) -> _inference.Sandwich:
        """The sandwich (Thms. 4, 6) with its gradient and Hessian; see
        :func:`~stein_coreset.estimators.inference.sandwich`."""
        if self.nonsmooth:
            return _inference.Sandwich(None, None, None, "the score is not differentiable in "
                                       f"{', '.join(self.nonsmooth)}: no asymptotic normal "
                                       "theory")
        return self.guarded(theta, "sandwich covariance", lambda: _inference.sandwich(
            self.model, self.X, theta, self.discrepancy, self.kernel, self.diff,
            self.n_threads, steps), check=False)

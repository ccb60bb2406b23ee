"""Where a model lives: the open intervals of its parameters and the support of its data.

A model may declare

- ``param_names``: a name per free parameter (used in messages, ``FitResult.params`` and the
  summary table; default ``theta[j]``);
- ``bounds``: per free parameter an open interval ``(lower, upper)``, either end ``None`` for
  unbounded (a scale ``(0, None)``, a correlation ``(-1, 1)``, an upper limit ``(None, 5)``);
- ``support``: the open interval(s) the data live in, ``(lower, upper)`` for every coordinate or
  one such pair per coordinate (a Gamma: ``(0, None)``); a sample with a point outside is refused
  by name, since the model gives it zero density and Stein's identity, on which every loss
  rests, fails there.

:class:`ParameterSpace` turns the bounds into the checks of a parameter vector and into the
transforms the optimisers work in (Sec. 2.4 leaves the parametrisation free): theta = lower +
exp(phi) below a lower bound, upper - exp(phi) under an upper one, and a logistic map onto
(lower, upper) for both, so that an optimiser's iterate never sits on or beyond a bound.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _array_api as aa

__all__ = ["ParameterSpace", "check_theta", "check_support", "support_of"]


def _bound(v, what):
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a real number or None, got {v!r}") from None
    if math.isnan(f):
        raise ValueError(f"{what} is NaN")
    return None if math.isinf(f) else f


class ParameterSpace:
    """Names and open bounds of a model's free parameters, and the optimisers' transforms.

    Parameters
    ----------
    names : sequence of str
    bounds : sequence of (lower, upper) or None
        Open interval per parameter; ``None`` ends (or ``+-inf``) are unbounded.
    model : object, optional
        A model whose own ``check_domain(theta, name)`` / ``in_domain(theta)`` are honoured
        besides the bounds.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.estimators.domains import ParameterSpace
    >>> space = ParameterSpace(["loc", "rho"], [(None, None), (-1.0, 1.0)])
    >>> phi = space.to_free(np.array([0.5, 0.9]))
    >>> np.round(space.from_free(phi), 12).tolist(), space.inside(np.array([0.0, 1.0]))
    ([0.5, 0.9], False)
    """

    def __init__(self, names, bounds=None, model=None):
        self.names = tuple(str(n) for n in names)
        p = len(self.names)
        if bounds is None:
            bounds = [(None, None)] * p
        bounds = list(bounds)
        if len(bounds) != p:
            raise ValueError(f"the model declares {len(bounds)} bounds for {p} parameters "
                             f"({', '.join(self.names)})")
        self.lower, self.upper = [], []
        for name, b in zip(self.names, bounds, strict=True):
            try:
                lo, hi = b
            except (TypeError, ValueError):
                raise TypeError(f"bounds of {name} must be a pair (lower, upper), got {b!r}") \
                    from None
            lo, hi = _bound(lo, f"the lower bound of {name}"), _bound(hi, f"the upper bound "
                                                                          f"of {name}")
            if lo is not None and hi is not None and not lo < hi:
                raise ValueError(f"the bounds of {name} are empty: ({lo}, {hi})")
            self.lower.append(lo)
            self.upper.append(hi)
        self.model = model

    @classmethod
    def of(cls, model, p: int) -> ParameterSpace:
        """The space of ``model`` with ``p`` free parameters (its ``param_names`` and
        ``bounds`` when it declares them)."""
        names = getattr(model, "param_names", None) or [f"theta[{j}]" for j in range(p)]
        if len(names) != p:
            names = [f"theta[{j}]" for j in range(p)]
        return cls(names, getattr(model, "bounds", None), model)

    @property
    def bounded(self) -> bool:
        return any(v is not None for v in self.lower + self.upper)

    def describe(self, j: int) -> str:
        """``"scale > 0"``, ``"-1 < rho < 1"``, ``"loc"``."""
        lo, hi, nm = self.lower[j], self.upper[j], self.names[j]
        if lo is not None and hi is not None:
            return f"{lo:g} < {nm} < {hi:g}"
        if lo is not None:
            return f"{nm} > {lo:g}"
        if hi is not None:
            return f"{nm} < {hi:g}"
        return nm

    def violation(self, theta) -> int | None:
        """The first parameter outside its open interval, or None."""
        for j, (lo, hi) in enumerate(zip(self.lower, self.upper, strict=True)):
            if (lo is not None and not theta[j] > lo) or (hi is not None and not theta[j] < hi):
                return j
        return None

    def inside(self, theta) -> bool:
        """theta lies in every open interval (and in the model's own domain, if it has one)."""
        if not np.all(np.isfinite(theta)) or self.violation(theta) is not None:
            return False
        own = getattr(self.model, "in_domain", None)
        return bool(own(theta)) if own is not None else True

    def check(self, theta, name: str = "theta") -> None:
        """ValueError naming the first parameter outside its interval."""
        j = self.violation(theta)
        if j is not None:
            raise ValueError(f"{name}[{j}] ({self.names[j]}) must satisfy {self.describe(j)}, "
                             f"got {theta[j]:.6g}")
        own = getattr(self.model, "check_domain", None)
        if own is not None:
            own(theta, name)

    # ---- the optimisers' unconstrained coordinates -------------------------------------------

    def _kind(self, j):
        lo, hi = self.lower[j], self.upper[j]
        return ("both" if hi is not None else "lower") if lo is not None else \
            ("upper" if hi is not None else "free")

    def to_free(self, theta) -> np.ndarray:
        """phi of theta (theta inside the bounds)."""
        phi = np.array(theta, dtype=np.float64)
        for j in range(phi.size):
            k, lo, hi = self._kind(j), self.lower[j], self.upper[j]
            if k == "lower":
                phi[j] = math.log(theta[j] - lo)
            elif k == "upper":
                phi[j] = math.log(hi - theta[j])
            elif k == "both":
                s = (theta[j] - lo) / (hi - lo)
                phi[j] = math.log(s) - math.log1p(-s)
        return phi

    def from_free(self, phi) -> np.ndarray:
        """theta of phi; never on a bound unless exp under- or overflows."""
        theta = np.array(phi, dtype=np.float64)
        with np.errstate(over="ignore", under="ignore"):
            for j in range(theta.size):
                k, lo, hi = self._kind(j), self.lower[j], self.upper[j]
                if k == "lower":
                    theta[j] = lo + np.exp(phi[j])
                elif k == "upper":
                    theta[j] = hi - np.exp(phi[j])
                elif k == "both":
                    s = 1.0 / (1.0 + np.exp(-phi[j])) if phi[j] >= 0 else \
                        np.exp(phi[j]) / (1.0 + np.exp(phi[j]))
                    theta[j] = lo + (hi - lo) * s
        return theta

    def jacobian(self, theta) -> np.ndarray:
        """d theta_j / d phi_j at theta, (p,) (the transforms act coordinatewise)."""
        J = np.ones(len(self.names))
        for j in range(J.size):
            k, lo, hi = self._kind(j), self.lower[j], self.upper[j]
            if k == "lower":
                J[j] = theta[j] - lo
            elif k == "upper":
                J[j] = -(hi - theta[j])
            elif k == "both":
                J[j] = (theta[j] - lo) * (hi - theta[j]) / (hi - lo)
        return J

    def transformed(self) -> list:
        """Indices of the parameters with at least one bound (a log or logistic transform)."""
        return [j for j in range(len(self.names)) if self._kind(j) != "free"]


def check_theta(model, theta, name: str = "theta") -> np.ndarray:
    """Validate a parameter vector: host float64 (p,), finite, inside the model's domain."""
    import array_api_compat

    if array_api_compat.is_array_api_obj(theta) and not isinstance(theta, np.ndarray):
        t = aa.to_host(theta)
    else:
        try:
            t = np.asarray(theta, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a vector of real numbers, got {theta!r}") from None
    t = np.atleast_1d(t).astype(np.float64)
    if t.ndim != 1:
        raise ValueError(f"{name} must be a 1-D parameter vector, got shape {t.shape}")
    p = getattr(model, "n_params", None)
    if p is not None and t.size != p:
        names = getattr(model, "param_names", None)
        hint = f" ({', '.join(names)})" if names else ""
        raise ValueError(f"{name} must have {p} entries{hint}, got {t.size}")
    if not np.all(np.isfinite(t)):
        raise ValueError(f"{name} has NaN or inf entries: {t}")
    ParameterSpace.of(model, t.size).check(t, name)
    return t


def support_of(model, d: int):
    """The model's declared support as d (lower, upper) pairs, or None."""
    sup = getattr(model, "support", None)
    if sup is None:
        return None
    sup = list(sup)
    if len(sup) == 2 and not any(isinstance(s, (tuple, list)) for s in sup):
        sup = [tuple(sup)] * d
    if len(sup) != d:
        raise ValueError(f"{model!r} declares a support for {len(sup)} coordinates, the data "
                         f"have {d}")
    out = []
    for j, pair in enumerate(sup):
        lo, hi = pair
        out.append((_bound(lo, f"the support's lower end in x[{j}]"),
                    _bound(hi, f"the support's upper end in x[{j}]")))
    return out


def check_support(model, X, name: str = "X") -> None:
    """ValueError when a row of X lies outside the model's declared (open) support, naming the
    model, the support, how many rows and the first of them. One pass over X."""
    sup = support_of(model, int(X.shape[1]))
    if sup is None or all(lo is None and hi is None for lo, hi in sup):
        return
    xp, _ = aa.namespace(X=X)
    n = int(X.shape[0])
    out = xp.zeros((n,), dtype=xp.bool)
    for j, (lo, hi) in enumerate(sup):
        if lo is not None:
            out = out | ~(X[:, j] > lo)
        if hi is not None:
            out = out | ~(X[:, j] < hi)
    bad = int(xp.sum(xp.astype(out, xp.int64)))
    if not bad:
        return
    Xh = aa.to_host(X)
    first = int(np.flatnonzero(aa.to_host(out))[0])
    desc = ", ".join(
        (f"{lo:g} < x[{j}] < {hi:g}" if lo is not None and hi is not None else
         f"x[{j}] > {lo:g}" if lo is not None else f"x[{j}] < {hi:g}")
        for j, (lo, hi) in enumerate(sup) if lo is not None or hi is not None)
    raise ValueError(
        f"{name} has {bad} of {n} rows outside the support of {model!r} ({desc}; first: row "
        f"{first}, {np.array2string(Xh[first], precision=6)}): the model gives them zero "
        "density, so no Stein discrepancy between them and the model is defined; drop them, or "
        "use a model whose support contains them"
    )

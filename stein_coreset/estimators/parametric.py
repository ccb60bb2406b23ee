"""The base of the built-in models: a full parameter vector, some entries fixed, the rest free.

``StudentT(nu=5, scale=1.0)`` has theta = (location,): a parameter given a value is fixed, one
left ``None`` is estimated. The free parameters keep the order of the layout and its names
(``param_names``), their open intervals (``bounds``, ``stein_coreset.estimators.domains``)
and the robust default start (median / MAD).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _array_api as aa
from .. import _validation as _val
from .domains import ParameterSpace

__all__ = ["Parametric", "check_d", "eye_matrix"]


def check_d(d) -> int:
    """The dimension of a model: an integer >= 1 (``d=1.5`` used to become 1 silently)."""
    return _val.check_int(d, "d", lo=1)


def eye_matrix(xp, d, dev):
    return xp.eye(d, dtype=xp.float64, device=dev)


class Parametric:
    """A model with a full parameter vector, some entries fixed, the rest estimated.

    Subclasses call ``_setup(layout)`` with a list of (name, size, (lower, upper), fixed value
    or None) and define ``_score(xp, x, full)``, ``_score_dtheta(xp, x, full)`` ((n, d, P) over
    the full vector) and ``_score_dx(xp, x, full)``; ``support`` (the data's open interval, see
    ``stein_coreset.estimators.domains``) where the density is not positive everywhere.
    """

    d: int
    support = None

    def _setup(self, layout):
        self._layout = layout
        full, free, bounds, names = [], [], [], []
        for name, size, (lo, hi), val in layout:
            if val is None:
                vals = [np.nan] * size
            else:
                arr = np.asarray(val, dtype=np.float64)
                if arr.size not in (1, size):
                    raise ValueError(
                        f"{name} has {arr.size} entries, but the model has {size} "
                        f"({type(self).__name__} of d = {getattr(self, 'd', size)}); pass "
                        f"d={arr.size} for {arr.size}-dimensional data"
                    )
                vals = list(np.broadcast_to(arr.reshape(-1) if arr.size == size else arr,
                                            (size,)))
                if not all(math.isfinite(v) for v in vals):
                    raise ValueError(f"{name} must be finite, got {val}")
                if lo is not None and any(not (v > lo) for v in vals):
                    raise ValueError(f"{name} must be > {lo}, got {val}")
                if hi is not None and any(not (v < hi) for v in vals):
                    raise ValueError(f"{name} must be < {hi}, got {val}")
            for i, v in enumerate(vals):
                idx = len(full)
                full.append(v)
                if val is None:
                    free.append(idx)
                    bounds.append((lo, hi))
                    names.append(name if size == 1 else f"{name}[{i}]")
        self._full_template = np.asarray(full, dtype=np.float64)
        self._free = np.asarray(free, dtype=np.int64)
        self._bounds = bounds
        self.param_names = tuple(names)
        if not free:
            raise ValueError("every parameter is fixed; leave at least one as None to estimate")
        # the constants the model was built with (d, nu, s, ...) and its layout: set once
        object.__setattr__(self, "_frozen", frozenset(
            k for k in vars(self) if not k.startswith("_")))

    def __setattr__(self, name, value):
        # before: model.d = 3 or model.nu = -1 after construction was taken silently, the
        # parameter layout still the one built for the old value (scores of another model, or
        # NaN reported as "model.score returned NaN")
        if name in getattr(self, "_frozen", ()):
            raise AttributeError(
                f"{type(self).__name__}.{name} is fixed when the model is built (it is "
                f"{getattr(self, name)!r}); build a new model, {type(self).__name__}({name}=...)"
            )
        object.__setattr__(self, name, value)

    @property
    def n_params(self) -> int:
        return int(self._free.size)

    @property
    def bounds(self):
        """The open interval (lower, upper) of each free parameter, None where unbounded."""
        return list(self._bounds)

    def check_domain(self, theta, name="theta"):
        ParameterSpace(self.param_names, self._bounds).check(theta, name)

    def in_domain(self, theta) -> bool:
        return ParameterSpace(self.param_names, self._bounds).inside(theta)

    def full(self, theta) -> np.ndarray:
        f = self._full_template.copy()
        f[self._free] = np.asarray(theta, dtype=np.float64)
        return f

    def _check_x(self, x):
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (n, {self.d}) for this model, got {x.shape}")

    def score(self, x, theta):
        xp, _ = aa.namespace(x=x)
        self._check_x(x)
        return self._score(xp, x, self.full(theta))

    def score_dtheta(self, x, theta):
        xp, _ = aa.namespace(x=x)
        self._check_x(x)
        J = self._score_dtheta(xp, x, self.full(theta))
        return xp.stack([J[:, :, int(j)] for j in self._free], axis=2)

    def score_dx(self, x, theta):
        xp, _ = aa.namespace(x=x)
        self._check_x(x)
        return self._score_dx(xp, x, self.full(theta))

    def _loc_scale(self, full):
        return full[: self.d], float(full[self.d])

    def default_theta0(self, X) -> np.ndarray:
        """Robust start: coordinatewise median for locations, scaled MAD for scales, and
        ``_default(name, X)`` for the others."""
        Xh = aa.to_host(X)
        med = np.median(Xh, axis=0)
        mad = float(np.median(np.abs(Xh - med))) / 0.6745
        if not mad > 0:  # half the sample on one value: the spread of the rest
            mad = float(np.mean(np.abs(Xh - med))) or 1.0
        full = self._full_template.copy()
        k = 0
        for name, size, _b, val in self._layout:
            if val is None:
                if name == "loc":
                    full[k : k + size] = med
                elif name == "scale":
                    full[k : k + size] = self._scale_from_mad(mad)
                else:
                    full[k : k + size] = self._default(name, Xh)
            k += size
        return full[self._free]

    def _scale_from_mad(self, mad):
        return mad

    def _default(self, name, Xh):  # pragma: no cover - overridden where a model has other params
        return 1.0

    def __repr__(self):
        parts = [f"{name}={'free' if val is None else val}" for name, _s, _b, val in self._layout]
        return f"{type(self).__name__}({', '.join(parts)})"

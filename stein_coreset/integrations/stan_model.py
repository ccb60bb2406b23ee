"""A Stan model under BridgeStan's method names, and Stan's flat parameter order.

:func:`stan_functions` gives :func:`stein_coreset.integrations.stan.fit_scores` one interface to
every Stan model: an object with BridgeStan's method names (``param_names``, ``param_unc_num``,
``param_unconstrain``, ``log_density_gradient``, ``param_constrain``; a ``bridgestan.StanModel``)
is used as it is, and a PyStan 3 model is wrapped in :class:`PyStanModel`, which calls its
compiled module from httpstan's cache in this process. :class:`StanVariables` maps between
Stan's flat, column-major entries (``theta.1``, ``L.2.1``) and variables with shapes.
Re-exported by :mod:`stein_coreset.integrations.stan`. PyStan and httpstan are imported lazily.
"""

from __future__ import annotations

import re
import weakref

import numpy as np

__all__ = ["PyStanModel", "stan_functions", "StanVariables"]

_BRIDGESTAN = ("param_unconstrain", "log_density_gradient", "param_constrain", "param_names",
               "param_unc_num")


class PyStanModel:
    """A PyStan 3 model (``stan.build``'s result) with BridgeStan's method names.

    Calls the model's compiled module in httpstan's cache directly (the functions behind
    PyStan's ``log_prob``, ``grad_log_prob``, ``unconstrain_pars`` and ``constrain_pars``,
    without the HTTP server PyStan starts for each call), so a gradient costs what Stan's does
    plus building the model from its data (a fraction of a millisecond for small data).

    Parameters
    ----------
    model : stan.model.Model
        What ``stan.build(program_code, data=...)`` returned; its compiled module must be in
        httpstan's cache (``stan.build`` puts it there; httpstan keys it on the program, the
        httpstan version and the Python executable).

    Attributes
    ----------
    model : stan.model.Model
        The wrapped model.
    data : dict
        The data it was built with.

    Notes
    -----
    Only ``propto=True`` densities are available (what PyStan exposes): the scores do not
    depend on the constant, and :func:`compress_fit` needs nothing else.

    See Also
    --------
    stan_functions : wraps a PyStan model, passes a BridgeStan one through.

    Examples
    --------
    A positive parameter, s ~ Exponential(1), unconstrained as u = log s (the first build of a
    program compiles it, once per machine):

    >>> import numpy as np, stan
    >>> from stein_coreset.integrations.stan import PyStanModel
    >>> program = "parameters {real<lower=0> s;} model {s ~ exponential(1);}"
    >>> posterior = stan.build(program, random_seed=1)
    Building...
    >>> m = PyStanModel(posterior)
    >>> m.param_names(), m.param_unc_num()
    (['s'], 1)
    >>> m.param_unconstrain(np.array([2.0])), m.param_constrain(np.array([0.0]))
    (array([0.69314718]), array([1.]))
    >>> m.log_density_gradient(np.array([0.0]))[1]     # d/du (u - e^u) at u = 0: Jacobian in
    array([0.])
    """

    def __init__(self, model):
        try:
            import httpstan.models
        except ImportError as exc:  # pragma: no cover - PyStan needs httpstan
            raise ImportError(
                "PyStanModel needs PyStan 3: pip install -r requirements/stan.txt in the "
                "stein_coreset source tree (or pip install pystan)"
            ) from exc
        self.model = model
        self.data = dict(model.data)
        try:
            self._services = httpstan.models.import_services_extension_module(model.model_name)
        except KeyError as exc:
            import httpstan.cache

            raise ValueError(
                f"model: its compiled module ({model.model_name}) is not in httpstan's cache "
                f"({httpstan.cache.cache_directory()}); build it again with stan.build"
            ) from exc
        self._all_names = tuple(model.constrained_param_names)
        self._n_unc = None
        self._n_par = None

    def __repr__(self) -> str:
        return f"PyStanModel({self.model.model_name!r}, d={self.param_unc_num()})"

    # sizes and names ------------------------------------------------------------------------------
    def param_unc_num(self) -> int:
        """Number of unconstrained parameters (found once by asking Stan which length it
        accepts: PyStan does not expose it)."""
        if self._n_unc is None:
            for d in range(len(self._all_names) + 1):
                try:
                    self._services.write_array(self.data, [0.0] * d, False, False)
                except RuntimeError as exc:
                    if "number of parameters does not match" in str(exc):
                        continue
                    raise
                self._n_unc = d
                break
            else:
                raise ValueError(
                    "model: Stan accepted no length of unconstrained parameters up to "
                    f"{len(self._all_names)}; is it a PyStan 3 model?"
                )
        return self._n_unc

    def param_num(self, *, include_tp: bool = False, include_gq: bool = False) -> int:
        """Number of constrained parameter entries (with transformed parameters and generated
        quantities when asked)."""
        if include_tp or include_gq:
            x = np.zeros(self.param_unc_num())
            return len(self._services.write_array(self.data, x.tolist(), include_tp, include_gq))
        if self._n_par is None:
            x = [0.0] * self.param_unc_num()
            self._n_par = len(self._services.write_array(self.data, x, False, False))
        return self._n_par

    def param_names(self, *, include_tp: bool = False, include_gq: bool = False) -> list:
        """Stan's indexed names of the constrained entries (``theta.1``, ``L.2.1``), in the
        order of :meth:`param_constrain`."""
        return list(self._all_names[: self.param_num(include_tp=include_tp,
                                                     include_gq=include_gq)])

    # maps ---------------------------------------------------------------------------------------
    def param_unconstrain(self, theta) -> np.ndarray:
        """Constrained parameter entries (Stan's order, :meth:`param_names`) -> unconstrained."""
        theta = np.asarray(theta, dtype=np.float64).ravel()
        return np.asarray(
            self._services.transform_inits(self.data, self._as_context(theta)), dtype=np.float64
        )

    def param_constrain(self, theta_unc, *, include_tp: bool = False, include_gq: bool = False,
                        rng=None) -> np.ndarray:
        """Unconstrained parameters -> constrained entries in Stan's order (``rng`` is not
        used: PyStan's ``write_array`` seeds its own)."""
        x = np.asarray(theta_unc, dtype=np.float64).ravel().tolist()
        return np.asarray(
            self._services.write_array(self.data, x, include_tp, include_gq), dtype=np.float64
        )

    def log_density(self, theta_unc, *, propto: bool = True, jacobian: bool = True) -> float:
        """Log density at unconstrained parameters (up to a constant)."""
        self._check_propto(propto)
        x = np.asarray(theta_unc, dtype=np.float64).ravel().tolist()
        return float(self._services.log_prob(self.data, x, bool(jacobian)))

    def log_density_gradient(self, theta_unc, *, propto: bool = True, jacobian: bool = True):
        """``(log density, gradient)`` at unconstrained parameters, the Jacobian adjustment
        included by default (the density Stan's samplers follow)."""
        self._check_propto(propto)
        x = np.asarray(theta_unc, dtype=np.float64).ravel().tolist()
        grad = np.asarray(self._services.log_prob_grad(self.data, x, bool(jacobian)), np.float64)
        return float(self._services.log_prob(self.data, x, bool(jacobian))), grad

    def log_density_gradient_only(self, theta_unc, *, jacobian: bool = True) -> np.ndarray:
        """The gradient of :meth:`log_density_gradient` alone (half its cost)."""
        x = np.asarray(theta_unc, dtype=np.float64).ravel().tolist()
        return np.asarray(self._services.log_prob_grad(self.data, x, bool(jacobian)), np.float64)

    @staticmethod
    def _check_propto(propto):
        if not propto:
            raise ValueError("propto: PyStan gives the log density up to a constant only "
                             "(propto=True)")

    def _as_context(self, theta: np.ndarray) -> dict:
        """Flat constrained entries -> the {name: nested list} Stan's transform_inits reads."""
        out, start = {}, 0
        for var in StanVariables(self.param_names()).variables:
            name, dims = var
            size = int(np.prod(dims, dtype=np.int64)) if dims else 1
            v = theta[start:start + size]
            out[name] = float(v[0]) if not dims else v.reshape(dims, order="F").tolist()
            start += size
        return out


_WRAPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def stan_functions(model):
    """The object :func:`fit_scores` calls: BridgeStan's method names on any Stan model.

    Parameters
    ----------
    model : stan.model.Model or object with BridgeStan's method names
        A PyStan 3 model is wrapped in a :class:`PyStanModel` (cached per model); an object
        with ``param_unconstrain``, ``log_density_gradient``, ``param_constrain``,
        ``param_names`` and ``param_unc_num`` (a ``bridgestan.StanModel``, say) is returned as
        it is.

    Returns
    -------
    object with BridgeStan's method names

    Raises
    ------
    TypeError
        Naming the methods a model lacks.

    Examples
    --------
    >>> from stein_coreset.integrations.stan import stan_functions
    >>> stan_functions(object())
    Traceback (most recent call last):
    ...
    TypeError: model: expected a PyStan 3 model (stan.build) or an object with BridgeStan's methods; object lacks param_unconstrain, log_density_gradient, param_constrain, param_names, param_unc_num
    """  # noqa: E501
    if all(callable(getattr(model, m, None)) for m in _BRIDGESTAN):
        return model
    if type(model).__module__.startswith("stan.") and hasattr(model, "model_name"):
        try:
            hit = _WRAPPED.get(model)
        except TypeError:
            return PyStanModel(model)
        if hit is None:
            hit = _WRAPPED[model] = PyStanModel(model)
        return hit
    lacks = ", ".join(m for m in _BRIDGESTAN if not callable(getattr(model, m, None)))
    raise TypeError(
        "model: expected a PyStan 3 model (stan.build) or an object with BridgeStan's methods; "
        f"{type(model).__name__} lacks {lacks}"
    )


class StanVariables:
    """Stan's parameters as variables: names and shapes from the indexed entry names.

    Parameters
    ----------
    flat_names : list of str
        Stan's indexed names in Stan's order (``mu``, ``theta.1``, ``theta.2``, ``L.1.1``,
        ``L.2.1``, ...), as ``param_names()`` gives them; multi-index containers are
        column-major (the first index runs fastest).

    Attributes
    ----------
    variables : list of (str, tuple of int)
        Each variable's name and shape, in order.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.integrations.stan import StanVariables
    >>> v = StanVariables(["mu", "L.1.1", "L.2.1", "L.1.2", "L.2.2", "L.1.3", "L.2.3"])
    >>> v.variables
    [('mu', ()), ('L', (2, 3))]
    >>> L = np.arange(6.0).reshape(1, 2, 3)              # one draw of L
    >>> flat = v.to_flat({"mu": np.zeros(1), "L": L})    # Stan's column-major order
    >>> flat
    array([[0., 0., 3., 1., 4., 2., 5.]])
    >>> v.from_flat(flat)["L"][0]
    array([[0., 1., 2.],
           [3., 4., 5.]])
    """

    def __init__(self, flat_names):
        variables: dict = {}
        for full in flat_names:
            name, *idx = str(full).split(".")
            if not all(re.fullmatch(r"\d+", i) for i in idx):
                raise ValueError(
                    f"model: parameter entry {full!r} is not a real array entry (complex and "
                    "tuple parameters are not supported)"
                )
            idx = tuple(int(i) for i in idx)
            if name in variables:
                prev = variables[name]
                if len(prev) != len(idx):
                    raise ValueError(f"model: parameter {name!r} has entries of mixed rank")
                variables[name] = tuple(max(a, b) for a, b in zip(prev, idx, strict=True))
            else:
                variables[name] = idx
        self.variables = list(variables.items())
        self.sizes = [int(np.prod(s, dtype=np.int64)) if s else 1 for _, s in self.variables]
        self.names = [n for n, _ in self.variables]

    def to_flat(self, values: dict) -> np.ndarray:
        """dict name -> ``(n, *shape)`` -> ``(n, entries)`` in Stan's order."""
        cols = []
        for (name, shape), size in zip(self.variables, self.sizes, strict=True):
            v = np.asarray(values[name], dtype=np.float64)
            n = v.shape[0]
            if v.shape[1:] != shape:
                raise ValueError(
                    f"the draws of {name!r} have shape {v.shape[1:]} per draw, but the model's "
                    f"{name!r} has shape {shape}; are they draws of this model (and data)?"
                )
            axes = (0, *range(v.ndim - 1, 0, -1))  # column-major: reverse the entry axes
            cols.append(v.transpose(axes).reshape(n, size))
        return np.concatenate(cols, axis=1)

    def from_flat(self, flat) -> dict:
        """``(n, entries)`` in Stan's order -> dict name -> ``(n, *shape)``."""
        flat = np.asarray(flat, dtype=np.float64)
        out, start, n = {}, 0, flat.shape[0]
        for (name, shape), size in zip(self.variables, self.sizes, strict=True):
            v = flat[:, start:start + size].reshape((n, *shape[::-1]))
            out[name] = v.transpose((0, *range(v.ndim - 1, 0, -1)))
            start += size
        return out

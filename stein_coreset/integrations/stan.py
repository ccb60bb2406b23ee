"""A Stan fit in, a debiased weighted ArviZ result out: PyStan 3, CmdStan CSV, BridgeStan.

:func:`compress_fit` takes the draws of a Stan program (a PyStan 3 ``stan.fit.Fit``, CmdStan
output CSV files, or an ArviZ object holding them), warm-up included when it was saved, and the
program's model: a PyStan 3 model (what ``stan.build`` returns) or any object with BridgeStan's
method names (``param_unconstrain``, ``log_density_gradient``, ``param_constrain``,
``param_names``, ``param_unc_num``: a ``bridgestan.StanModel`` is one). It maps the draws to the
unconstrained space Stan samples in, evaluates the gradient of the log density there *with* the
Jacobian adjustment (the density NUTS follows), compresses, maps the coreset back through the
model's own ``constrain`` and returns what :func:`stein_coreset.integrations.pymc.compress_trace`
returns (built by the same code, :func:`stein_coreset.integrations.results.compress_scored`).

A PyStan model is wrapped by :class:`PyStanModel`, which gives it BridgeStan's method names and
calls the model's compiled module (from httpstan's cache) in this process, so both kinds of
model go through one code path. PyStan, httpstan, ArviZ and xarray are imported lazily.
"""

from __future__ import annotations

import math
import os
import re
import time
import weakref

import numpy as np

from .. import _progress
from .. import _validation as val
from . import arviz as _az
from .results import ScoredDraws, check_var_names, compress_scored

__all__ = [
    "compress_fit", "fit_scores", "stan_functions", "PyStanModel", "StanVariables",
    "fit_groups", "read_cmdstan_csv",
]

#: Stan's sampler statistics and the names ArviZ gives them (as ``az.from_pystan`` does).
SAMPLE_STATS = {
    "lp__": "lp", "accept_stat__": "acceptance_rate", "stepsize__": "step_size",
    "treedepth__": "tree_depth", "n_leapfrog__": "n_steps", "divergent__": "diverging",
    "energy__": "energy",
}
_BRIDGESTAN = ("param_unconstrain", "log_density_gradient", "param_constrain", "param_names",
               "param_unc_num")


# ---- a PyStan model under BridgeStan's method names ----------------------------------------------


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


# ---- the draws as ArviZ groups -------------------------------------------------------------------


def fit_groups(fit) -> dict:
    """The groups of a Stan fit, as ``az.from_pystan`` / ``az.from_cmdstan`` name them.

    Parameters
    ----------
    fit : stan.fit.Fit, str, os.PathLike, list of paths, arviz.InferenceData, xarray.DataTree
        A PyStan 3 fit, one CmdStan output CSV file per chain, or an ArviZ object holding the
        draws (returned as it is).

    Returns
    -------
    dict of str to xarray.Dataset (or the ArviZ object)
        ``posterior`` (every variable: parameters, transformed parameters, generated
        quantities; dims ``(chain, draw, NAME_dim_0, ...)``), ``sample_stats`` (ArviZ's names:
        ``lp``, ``acceptance_rate``, ``step_size``, ``tree_depth``, ``n_steps``,
        ``diverging``, ``energy``), and ``warmup_posterior`` / ``warmup_sample_stats`` when the
        warm-up was saved.

    See Also
    --------
    read_cmdstan_csv : the CSV reader.

    Examples
    --------
    >>> from stein_coreset.integrations.stan import fit_groups
    >>> fit_groups(3.0)
    Traceback (most recent call last):
    ...
    TypeError: fit: expected a PyStan 3 fit, CmdStan CSV path(s) or an ArviZ object, got float
    """
    if isinstance(fit, (str, os.PathLike)) or (
        isinstance(fit, (list, tuple)) and fit and isinstance(fit[0], (str, os.PathLike))
    ):
        return read_cmdstan_csv(fit)
    if isinstance(fit, dict) or _az.has_group(fit, "posterior"):
        return fit
    if hasattr(fit, "stan_outputs") and hasattr(fit, "constrained_param_names"):
        return _pystan_groups(fit)
    raise TypeError(
        "fit: expected a PyStan 3 fit, CmdStan CSV path(s) or an ArviZ object, got "
        f"{type(fit).__name__}"
    )


def _datasets(params: dict, stats: dict, n_warm: int) -> dict:
    """Variables ``(chain, draw, *shape)`` and Stan's statistics ``(chain, draw)`` -> ArviZ
    groups, the first ``n_warm`` draws of each chain as the warm-up."""
    import xarray as xr

    stats = {SAMPLE_STATS.get(c, c.rstrip("_")): v for c, v in stats.items()}

    def ds(d, warm):
        out = {}
        for name, v in d.items():
            v = v[:, :n_warm] if warm else v[:, n_warm:]
            dims = tuple(f"{name}_dim_{i}" for i in range(v.ndim - 2))
            out[name] = (("chain", "draw") + dims, v)
        out = xr.Dataset(out)
        if "diverging" in out:
            out["diverging"] = out["diverging"].astype(bool)
        return out

    groups = {"posterior": ds(params, False), "sample_stats": ds(stats, False)}
    if n_warm:
        groups["warmup_posterior"] = ds(params, True)
        groups["warmup_sample_stats"] = ds(stats, True)
    return groups


def _pystan_groups(fit) -> dict:
    n_warm = math.ceil(fit.num_warmup * bool(fit.save_warmup) / fit.num_thin)
    n_saved = math.ceil(fit.num_samples / fit.num_thin) + n_warm
    nc = fit.num_chains

    def grid(v, dims):  # fit[name]: (*dims, draws * chains), chains interleaved per draw
        v = np.asarray(v, dtype=np.float64).reshape(tuple(dims) + (n_saved, nc))
        return np.moveaxis(v, (-1, -2), (0, 1))  # (chain, draw, *dims)

    stats = {c: grid(fit[c], ()) for c in fit.sample_and_sampler_param_names}
    params = {name: grid(fit[name], dims)
              for name, dims in zip(fit.param_names, fit.dims, strict=True)}
    return _datasets(params, stats, n_warm)


def read_cmdstan_csv(paths) -> dict:
    """Read CmdStan's sampler output (one CSV file per chain) into ArviZ groups.

    Parameters
    ----------
    paths : str, os.PathLike or list of them
        The output files, one per chain (same program and settings).

    Returns
    -------
    dict of str to xarray.Dataset
        As :func:`fit_groups`: ``posterior``, ``sample_stats``, and with
        ``save_warmup=true`` (``1``) the ``warmup_posterior`` / ``warmup_sample_stats`` groups:
        the rows before the ``# Adaptation terminated`` line.

    Raises
    ------
    ValueError
        When the files do not exist, have no header, or disagree in their columns or lengths.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from stein_coreset.integrations.stan import read_cmdstan_csv
    >>> text = ("# method = sample (Default)\\n#     save_warmup = true\\n"
    ...         "lp__,accept_stat__,theta.1,theta.2\\n-3,0.9,5.0,6.0\\n"
    ...         "# Adaptation terminated\\n# Step size = 0.7\\n-1,0.8,0.1,0.2\\n-1,0.7,0.3,0.4\\n")
    >>> path = os.path.join(tempfile.mkdtemp(), "chain_1.csv")
    >>> _ = open(path, "w").write(text)
    >>> groups = read_cmdstan_csv(path)
    >>> sorted(groups), groups["posterior"]["theta"].shape
    (['posterior', 'sample_stats', 'warmup_posterior', 'warmup_sample_stats'], (1, 2, 2))
    >>> float(groups["warmup_posterior"]["theta"][0, 0, 1])
    6.0
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("paths: no CmdStan CSV file given")
    chains = []
    for p in paths:
        if not os.path.isfile(p):
            raise ValueError(f"paths: {p!r} is not a file")
        header, warm, post, seen_end = None, [], [], False
        with open(p) as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                if line.startswith("#"):
                    if "Adaptation terminated" in line:
                        seen_end = True
                    continue
                if header is None:
                    header = line.split(",")
                    continue
                (post if seen_end else warm).append([float(x) for x in line.split(",")])
        if header is None:
            raise ValueError(f"paths: {p!r} has no CSV header (is it CmdStan's output?)")
        if not seen_end:  # no adaptation (fixed_param, adapt engaged=0): all rows are draws
            warm, post = [], warm
        chains.append((header, np.array(warm).reshape(-1, len(header)),
                       np.array(post).reshape(-1, len(header))))
    header = chains[0][0]
    for p, (h, w, s) in zip(paths, chains, strict=True):
        if h != header or w.shape != chains[0][1].shape or s.shape != chains[0][2].shape:
            raise ValueError(
                f"paths: {p!r} differs from {paths[0]!r} in its columns or number of draws"
            )
    n_warm = chains[0][1].shape[0]
    rows = np.stack([np.concatenate([w, s]) for _, w, s in chains])  # (chain, draw, column)
    nc, nd = rows.shape[:2]
    stats = {c: rows[:, :, j] for j, c in enumerate(header) if c.endswith("__")}
    cols = [j for j, c in enumerate(header) if not c.endswith("__")]
    params = {}
    if cols:
        variables = StanVariables([header[j] for j in cols])
        flat = rows[:, :, cols].reshape(nc * nd, len(cols))
        params = {name: v.reshape((nc, nd) + v.shape[1:])
                  for name, v in variables.from_flat(flat).items()}
    return _datasets(params, stats, n_warm)


# ---- the fit in the unconstrained space ----------------------------------------------------------


def fit_scores(
    fit,
    model,
    *,
    include_warmup: bool = True,
    batch_size: int = 256,
    progress: bool | None = None,
) -> ScoredDraws:
    """The draws of a Stan fit in the model's unconstrained space and the scores there.

    Parameters
    ----------
    fit : stan.fit.Fit, CmdStan CSV path(s), arviz.InferenceData or xarray.DataTree
        The draws (:func:`fit_groups` reads them); the warm-up is used when it was saved
        (``save_warmup=True`` in PyStan, ``save_warmup=1`` in CmdStan).
    model : stan.model.Model or object with BridgeStan's method names
        The program the draws come from, built with the same data (:func:`stan_functions`).
    include_warmup : bool
        Take the saved warm-up draws too.
    batch_size : int
        Draws per step of the progress bar (the gradient is Stan's, one draw per call).
    progress : bool, optional
        A bar over the unconstraining and scoring. Default: on when stderr is a terminal.

    Returns
    -------
    ScoredDraws
        ``X`` (unconstrained draws), ``S`` (gradients of the log density with the Jacobian
        adjustment), the source of every row, ``names`` (the model's parameters) and
        ``to_constrained`` (the model's ``param_constrain``).

    Notes
    -----
    Cost: one ``param_unconstrain`` and one ``log_density_gradient`` per draw (Stan's reverse
    mode: a few times the cost of the log density), O(n d) memory.

    See Also
    --------
    compress_fit : scores, compression and the way back in one call.

    Examples
    --------
    >>> import numpy as np, stan
    >>> from stein_coreset.integrations.stan import fit_scores
    >>> program = "parameters {real<lower=0> s;} model {s ~ exponential(1);}"
    >>> posterior = stan.build(program, random_seed=1)
    Building...
    >>> fit = posterior.sample(num_chains=2, num_warmup=20, num_samples=50, save_warmup=True)
    >>> sd = fit_scores(fit, posterior)
    >>> sd.X.shape, sd.n_warmup                      # 2 chains x (20 + 50), u = log s
    ((140, 1), 40)
    >>> bool(np.allclose(sd.S[:, 0], 1.0 - np.exp(sd.X[:, 0])))   # d/du (u - e^u)
    True
    """
    batch_size = val.check_int(batch_size, "batch_size", lo=1)
    include_warmup = val.check_bool(include_warmup, "include_warmup")
    progress = _progress.resolve(progress)
    fns = stan_functions(model)
    source = fit_groups(fit)
    post = _az.get_group(source, "posterior")
    groups = ["posterior"]
    note = ""
    if include_warmup and _az.has_group(source, "warmup_posterior"):
        if _duplicated_warmup(source):
            note = DUPLICATED_WARMUP
        else:
            groups = ["warmup_posterior", "posterior"]
    t0 = time.perf_counter()
    variables = StanVariables(fns.param_names())
    missing = [v for v in variables.names if v not in post.data_vars]
    if missing:
        raise ValueError(
            f"model: parameters {missing} are missing from the fit's posterior "
            f"({list(post.data_vars)}); is this the fit of another program?"
        )
    datasets = {g: _az.get_group(source, g) for g in groups}
    n_chains = int(post.sizes["chain"])
    blocks, src_group, src_chain, src_draw = [], [], [], []
    for c in range(n_chains):
        for g, ds in datasets.items():
            nd = int(ds.sizes["draw"])
            if nd == 0:
                continue
            blocks.append({v: ds[v].transpose("chain", "draw", ...).values[c]
                           for v in variables.names})
            src_group += [g] * nd
            src_chain.append(np.full(nd, c))
            src_draw.append(np.arange(nd))
    if not blocks:
        raise ValueError("fit: it holds no draws; there is nothing to score")
    theta = np.concatenate([variables.to_flat(b) for b in blocks])
    n = theta.shape[0]
    d = int(fns.param_unc_num())
    X = np.empty((n, d))
    S = np.empty((n, d))
    steps = range(0, n, batch_size)
    if progress:
        steps = _progress.progress_bar(steps, f"unconstraining {n} draws")
    for i in steps:
        for j in range(i, min(i + batch_size, n)):
            X[j] = fns.param_unconstrain(theta[j])
    t1 = time.perf_counter()
    grad_only = getattr(fns, "log_density_gradient_only", None)
    steps = range(0, n, batch_size)
    if progress:
        steps = _progress.progress_bar(steps, f"scores of {n} draws (batches of {batch_size})")
    for i in steps:
        for j in range(i, min(i + batch_size, n)):
            S[j] = _gradient(fns, grad_only, X[j])
    t2 = time.perf_counter()

    def to_constrained(rows):
        flat = np.stack([fns.param_constrain(r) for r in rows]) if len(rows) else (
            np.empty((0, sum(variables.sizes))))
        return variables.from_flat(flat[:, : sum(variables.sizes)])

    return ScoredDraws(
        X=X,
        S=S,
        source_group=np.asarray(src_group),
        source_chain=np.concatenate(src_chain).astype(np.int64),
        source_draw=np.concatenate(src_draw).astype(np.int64),
        names=list(variables.names),
        to_constrained=to_constrained,
        time_scores_s=t2 - t1,
        time_transform_s=t1 - t0,
        time_compile_s=0.0,
        scores_vectorized=False,
        note=note,
    )


#: What :func:`fit_scores` says when it leaves out a warm-up group that repeats the posterior.
DUPLICATED_WARMUP = (
    "the warmup_posterior group repeats the posterior draws (az.from_pystan of ArviZ 0.x "
    "fills it with the post-warm-up draws of a PyStan 3 fit), so it was left out; pass the "
    "PyStan fit itself to compress its warm-up"
)


def _duplicated_warmup(source) -> bool:
    """Whether the warm-up group holds the posterior's first draws again (ArviZ 0.x's
    ``from_pystan`` of a PyStan 3 fit slices ``values[:, num_warmup:]`` for both groups)."""
    warm, post = _az.get_group(source, "warmup_posterior"), _az.get_group(source, "posterior")
    nw, npost = int(warm.sizes.get("draw", 0)), int(post.sizes.get("draw", 0))
    if nw == 0 or nw > npost:
        return False
    return all(
        np.array_equal(warm[v].values, post[v].values[:, :nw], equal_nan=True)
        for v in warm.data_vars if v in post.data_vars
    )


def _gradient(fns, grad_only, x):
    """The score at x: NaN where Stan refuses the point (outside the support, a failed
    solver), for ``nan_policy`` to report or drop."""
    try:
        if grad_only is not None:
            return grad_only(x)
        return np.asarray(fns.log_density_gradient(x, propto=True, jacobian=True)[1])
    except (RuntimeError, ValueError):
        return np.full(x.shape, np.nan)


# ---- compress_fit ------------------------------------------------------------------------------


def compress_fit(
    fit,
    model,
    *,
    size: int,
    method: str,
    seed=None,
    var_names=None,
    include_warmup: bool = True,
    draws: int | None = None,
    resample_equal: bool = False,
    nan_policy: str = "raise",
    batch_size: int = 256,
    progress: bool | None = None,
    random_seed=None,
    **compress_options,
):
    """Compress a Stan fit to a debiased ``InferenceData`` that ArviZ cannot misread.

    Parameters
    ----------
    fit : stan.fit.Fit, CmdStan CSV path(s), arviz.InferenceData or xarray.DataTree
        The draws: ``posterior.sample(..., save_warmup=True)`` keeps the warm-up, which the
        debiased methods can use; CmdStan output files (one per chain); or
        ``az.from_pystan`` / ``az.from_cmdstan``'s result.
    model : stan.model.Model or object with BridgeStan's method names
        The program, built with the same data: ``stan.build(program_code, data=data)``, or a
        ``bridgestan.StanModel`` (anything with its method names).
    size : int
        Coreset size m.
    method : str
        A :func:`stein_coreset.compress` method: "st", "skt", "lskt" (equal weights), "sr",
        "lsr" (simplex), "sc", "lsc" (signed), or a baseline ("standard", "kt", ...).
    seed : None, int or numpy.random.Generator
        Seed of the compression (and of a simplex result's resample). ``random_seed`` is an
        alias.
    var_names : list of str, optional
        Posterior variables to return (default: all: parameters, transformed parameters and
        generated quantities, the last two from the source draws).
    include_warmup : bool
        Compress the saved warm-up draws too (default).
    draws : int, optional
        Simplex weights only: equal-weight draws resampled for the posterior group (default
        1000, or ``size`` if larger).
    resample_equal : bool
        ``True`` refuses signed weights (``ValueError``) instead of returning no posterior.
    nan_policy : {"raise", "omit"}
        Draws where Stan's gradient is NaN/inf (or Stan refuses the point): error naming the
        first, or dropped and counted in ``attrs["n_dropped"]``.
    batch_size : int
        Draws per step of the progress bar over the scores.
    progress : bool, optional
        Feedback on stderr (a bar over the scores, the compression's stages). Default: on
        when stderr is a terminal.
    **compress_options
        Passed to :func:`stein_coreset.compress` (``kernel``, ``rank``, ``tau``, ...).

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ >= 1, or a DataTree in)
        What :func:`stein_coreset.integrations.pymc.compress_trace` returns: ``posterior``
        (equal-weight draws only: each its own chain of one draw; none for signed weights),
        ``coreset`` (the weighted support, with ``weight``, ``source_chain``,
        ``source_draw``, ``source_warmup``), ``sample_stats`` of the kept draws, and the
        same attributes (``ksd``, ``n_warmup_input``, timings, ``note_warmup`` when the fit
        has no saved warm-up). Read the weighted figures with
        :func:`stein_coreset.integrations.arviz.summary`.

    Notes
    -----
    Cost: :func:`fit_scores` (one Stan gradient per draw), then the method's cost.

    See Also
    --------
    fit_scores : the unconstrained draws and their scores alone.
    stein_coreset.integrations.arviz.summary : weighted mean, sd and interval of the result.
    stein_coreset.integrations.pymc.compress_trace : the same for PyMC.

    Examples
    --------
    s ~ Exponential(1), sampled from far out (s = 40) with a short warm-up that is kept
    (``docs/integrations/stan.md`` runs eight schools):

    >>> import numpy as np, stan
    >>> from stein_coreset.integrations.arviz import get_group, summary
    >>> from stein_coreset.integrations.stan import compress_fit
    >>> program = "parameters {real<lower=0> s;} model {s ~ exponential(1);}"
    >>> posterior = stan.build(program, random_seed=1)
    Building...
    >>> fit = posterior.sample(num_chains=2, num_warmup=30, num_samples=200, save_warmup=True,
    ...                        init=[{"s": 40.0}] * 2)
    >>> res = compress_fit(fit, posterior, size=20, method="skt", seed=0)
    >>> cs = get_group(res, "coreset")
    >>> cs.attrs["n_input"], cs.attrs["n_warmup_input"], dict(get_group(res, "posterior").sizes)
    (460, 60, {'chain': 20, 'draw': 1})
    >>> list(summary(res).columns)
    ['mean', 'sd', 'eti_3%', 'eti_97%']
    """
    if random_seed is not None:
        if seed is not None:
            raise TypeError("give seed or its alias random_seed, not both")
        seed = random_seed
    val.check_choice(nan_policy, "nan_policy", ("raise", "omit"))
    resample_equal = val.check_bool(resample_equal, "resample_equal")
    include_warmup = val.check_bool(include_warmup, "include_warmup")
    if draws is not None:
        draws = val.check_int(draws, "draws", lo=1)
    progress = _progress.resolve(progress)
    rng = val.check_random_state(seed, "seed")
    source = fit_groups(fit)
    var_names = check_var_names(_az.get_group(source, "posterior"), var_names)
    scored = fit_scores(source, model, include_warmup=include_warmup, batch_size=batch_size,
                        progress=progress)
    note = ""
    if not scored.n_warmup:
        note = (
            "the fit has no saved warm-up draws (or include_warmup=False): only the post-warm-up "
            "draws were compressed; the debiased methods correct burn-in, so "
            "posterior.sample(..., save_warmup=True) (CmdStan: save_warmup=1) gives them its "
            "warm-up draws to choose from as well"
        )
    return compress_scored(
        scored, source, size=size, method=method, rng=rng, var_names=var_names, draws=draws,
        resample_equal=resample_equal, nan_policy=nan_policy, progress=progress,
        note_warmup=note, caller="compress_fit", **compress_options,
    )

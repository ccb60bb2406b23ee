"""A PyMC trace in, a debiased weighted ArviZ ``InferenceData`` out.

:func:`compress_trace` takes the draws of every free variable (all chains, and the warm-up when
it was kept: the burn-in is exactly what the debiased methods correct), maps them to the
unconstrained space PyMC samples in (the model's value variables and their transforms), evaluates
the scores with the model's own compiled gradient of the joint log density (vectorised over
draws, in batches), runs :func:`stein_coreset.compress` and maps the coreset back to the
constrained space. PyMC, PyTensor, ArviZ and xarray are imported lazily.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .. import _progress
from .. import _validation as val
from ..compress import compress
from . import arviz as _az

__all__ = ["TraceScores", "trace_scores", "compress_trace", "ModelFunctions", "model_functions"]


# ---- the model's compiled maps -----------------------------------------------------------------


class ModelFunctions:
    """Compiled maps of a PyMC model between constrained draws, unconstrained points and scores.

    ``forward`` (constrained free-variable values -> value variables), ``backward`` (value
    variables -> constrained values), ``dlogp`` (value variables -> gradient of the joint log
    density, Jacobian terms included, i.e. the score PyMC's samplers follow) and ``logp``. Each is
    vectorised over a leading batch dimension with ``pytensor.graph.replace.vectorize_graph``;
    when a graph cannot be vectorised (or the vectorised result disagrees with the per-draw one
    on the first draw) the per-draw function is looped over instead and ``vectorized`` is False.
    Use :func:`model_functions` to get one: it caches the instance per model.

    Parameters
    ----------
    model : pymc.Model
        A model whose free variables are all continuous (the scores need a gradient);
        otherwise a ``ValueError`` names the discrete ones.

    Attributes
    ----------
    names : list of str
        The free variables, in column order.
    value_names : list of str
        Their value variables (``sigma_log__`` for a positive ``sigma``): the unconstrained
        coordinates.
    d : int
        Number of unconstrained columns.
    vectorized : dict of str to bool
        Per compiled map, whether it runs batched (True) or draw by draw.

    Notes
    -----
    Construction builds the PyTensor graphs (no compilation); each map compiles on its first
    use, once per model (about a second with a warm PyTensor cache, tens of seconds on a cold
    one). Evaluation is one compiled call per batch of draws.

    See Also
    --------
    model_functions : the cached instance of a model.
    trace_scores : applies these maps to a whole trace.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from stein_coreset.integrations.pymc import ModelFunctions
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    ...     sigma = pm.HalfNormal("sigma", 1.0)
    >>> fns = ModelFunctions(model)
    >>> fns.names, fns.value_names, fns.d
    (['mu', 'sigma'], ['mu', 'sigma_log__'], 2)
    >>> X = np.array([[0.5, 0.0], [-1.0, np.log(2.0)]])   # rows (mu, log sigma)
    >>> fns.scores(X).round(3)                             # (-mu, 1 - sigma^2)
    array([[-0.5,  0. ],
           [ 1. , -3. ]])
    >>> [v.round(3) for v in fns.to_constrained(X)]        # mu, sigma
    [array([ 0.5, -1. ]), array([1., 2.])]
    """

    def __init__(self, model):
        import pytensor
        import pytensor.tensor as pt
        from pytensor.graph.replace import clone_replace  # pytensor 2.x and 3.x

        self.model = model
        self.free = list(model.free_RVs)
        if not self.free:
            raise ValueError("model: it has no free random variables to compress over")
        self.names = [rv.name for rv in self.free]
        self.values = [model.rvs_to_values[rv] for rv in self.free]
        discrete = [
            n
            for n, v in zip(self.names, self.values, strict=True)
            if not v.dtype.startswith("float")
        ]
        if discrete:
            raise ValueError(
                f"model: free variables {discrete} are discrete; the scores need a gradient, so "
                "every free variable must be continuous (marginalise discrete ones out)"
            )
        self.value_names = [v.name for v in self.values]
        transforms = getattr(model, "rvs_to_transforms", {})
        self.transforms = [transforms.get(rv) for rv in self.free]
        ip = model.initial_point()
        self._initial = [np.asarray(ip[name]) for name in self.value_names]
        self.value_shapes = [tuple(np.shape(ip[name])) for name in self.value_names]
        self.value_sizes = [int(np.prod(s, dtype=np.int64)) for s in self.value_shapes]
        self.d = int(sum(self.value_sizes))

        # forward: constrained placeholders -> value-variable values
        consts = [rv.type(name=f"{rv.name}_constrained") for rv in self.free]
        fwd = [
            tr.forward(rv, *rv.owner.inputs) if tr is not None else rv
            for rv, tr in zip(self.free, self.transforms, strict=True)
        ]
        fwd = clone_replace(fwd, replace=dict(zip(self.free, consts, strict=True)))
        fwd = [pt.as_tensor_variable(f) for f in fwd]
        # backward and the joint log density, in the value variables
        bwd = model.replace_rvs_by_values(self.free)
        logp = model.logp(jacobian=True)
        dlogp = pytensor.grad(logp, self.values)

        self._single_fns: dict = {}
        self._graphs = {
            "forward": (consts, fwd),
            "backward": (self.values, bwd),
            "dlogp": (self.values, dlogp),
            "logp": (self.values, [logp]),
        }
        self._batched: dict = {}
        self.vectorized: dict = {}

    def single(self, key):
        """The compiled per-draw map ``key`` (compiled on first use)."""
        if key not in self._single_fns:
            self._single_fns[key] = self._compile(*self._graphs[key])
        return self._single_fns[key]

    @staticmethod
    def _compile(inputs, outputs):
        import pytensor

        # float64 draws into a floatX=float32 model are cast down, as PyMC's own functions do
        return pytensor.function(
            inputs, outputs, on_unused_input="ignore", allow_input_downcast=True
        )

    def _batched_fn(self, key):
        if key not in self._batched:
            import pytensor.tensor as pt
            from pytensor.graph.replace import vectorize_graph

            inputs, outputs = self._graphs[key]
            try:
                binputs = [
                    pt.tensor(
                        name=f"{v.name}_batch", dtype=v.dtype, shape=(None,) + tuple(v.type.shape)
                    )
                    for v in inputs
                ]
                bout = vectorize_graph(outputs, replace=dict(zip(inputs, binputs, strict=True)))
                self._batched[key] = self._compile(binputs, bout)
            except Exception:  # noqa: BLE001 - any failure falls back to the per-draw loop
                self._batched[key] = None
        return self._batched[key]

    def __call__(
        self, key: str, args: list, batch_size: int = 1024, progress: str | None = None
    ) -> list:
        """Evaluate map ``key`` on batched inputs, each ``(n, *shape)``; list of ``(n, *shape)``.
        ``progress``: a label to show a bar over the batches (or draws) under."""
        n = int(args[0].shape[0])
        single = self.single(key)
        fn = self._batched_fn(key)
        if key not in self.vectorized:
            self._check_vectorized(key, args)
        if fn is not None and self.vectorized.get(key):
            starts = range(0, n, batch_size)
            if progress:
                starts = _progress.progress_bar(starts, f"{progress} (batches of {batch_size})")
            parts = [fn(*[a[i : i + batch_size] for a in args]) for i in starts]
            return [np.concatenate([np.asarray(p[j]) for p in parts]) for j in range(len(parts[0]))]
        self.vectorized[key] = False
        draws = range(n)
        if progress:
            draws = _progress.progress_bar(draws, f"{progress} (draw by draw)")
        rows = [single(*[a[i] for a in args]) for i in draws]
        return [np.stack([np.asarray(r[j]) for r in rows]) for j in range(len(rows[0]))]

    def _check_vectorized(self, key: str, args: list) -> None:
        """Call the batched and the per-draw map ``key`` on the first row of ``args`` and set
        ``vectorized[key]`` to whether they agree (False when there is no batched map)."""
        fn, ok = self._batched_fn(key), False
        if fn is not None:
            try:
                got = fn(*[a[:1] for a in args])
                want = self.single(key)(*[a[0] for a in args])
                ok = all(
                    np.allclose(
                        np.asarray(g)[0], np.asarray(w), rtol=1e-10, atol=1e-12, equal_nan=True
                    )
                    for g, w in zip(got, want, strict=True)
                )
            except Exception:  # noqa: BLE001 - any failure falls back to the per-draw loop
                ok = False
        self.vectorized[key] = ok

    def compile(self, keys=("forward", "dlogp", "backward")) -> None:
        """Compile the per-draw and batched maps ``keys`` now and make their first call, at the
        model's initial point (PyTensor 3 finishes building a function on its first call), so
        that later evaluations time evaluation only. Each map once per model."""
        for key in keys:
            if key in self.vectorized:
                continue
            example = [v[None] for v in self._initial]
            if key == "forward":  # takes constrained values
                example = [np.asarray(v)[None] for v in self.single("backward")(*self._initial)]
            self._check_vectorized(key, example)

    # flat views -------------------------------------------------------------------------------
    def split(self, X):
        """``(n, d)`` unconstrained rows -> list of ``(n, *value_shape)`` arrays."""
        n, out, start = X.shape[0], [], 0
        for shape, size in zip(self.value_shapes, self.value_sizes, strict=True):
            out.append(np.ascontiguousarray(X[:, start : start + size]).reshape((n,) + shape))
            start += size
        return out

    def join(self, parts) -> np.ndarray:
        """List of ``(n, *value_shape)`` arrays -> ``(n, d)`` float64 rows (undoes ``split``)."""
        n = parts[0].shape[0]
        return np.concatenate(
            [np.asarray(p, dtype=np.float64).reshape(n, -1) for p in parts], axis=1
        )

    def to_unconstrained(self, constrained: list, batch_size: int = 1024) -> np.ndarray:
        """``(n, *shape)`` constrained values per free variable -> ``(n, d)`` unconstrained
        rows."""
        return self.join(self("forward", constrained, batch_size))

    def to_constrained(self, X, batch_size: int = 1024) -> list:
        """``(n, d)`` unconstrained rows -> list of ``(n, *shape)`` constrained values per
        variable."""
        return self("backward", self.split(X), batch_size)

    def scores(self, X, batch_size: int = 1024, progress: str | None = None) -> np.ndarray:
        """(n, d) gradients of the joint log density at the unconstrained rows of X."""
        return self.join(self("dlogp", self.split(X), batch_size, progress))

    def logp(self, X, batch_size: int = 1024) -> np.ndarray:
        """(n,) joint log density (Jacobian terms included) at the unconstrained rows of X."""
        return np.asarray(self("logp", self.split(X), batch_size)[0]).reshape(-1)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def model_functions(model) -> ModelFunctions:
    """The model's :class:`ModelFunctions`, cached per model.

    The cache is keyed on the model and its current set of variables (a variable added
    later gives a fresh instance), so compressing one trace with several methods compiles the
    gradient once. It holds the model weakly: a model that is dropped frees its functions.

    Parameters
    ----------
    model : pymc.Model
        The model; one that cannot be weakly referenced is not cached.

    Returns
    -------
    ModelFunctions

    See Also
    --------
    ModelFunctions : the compiled maps.
    trace_scores : the one user of this cache most callers need.

    Examples
    --------
    >>> import pymc as pm
    >>> from stein_coreset.integrations.pymc import model_functions
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    >>> model_functions(model) is model_functions(model)
    True
    >>> with model:
    ...     tau = pm.HalfNormal("tau", 1.0)
    >>> model_functions(model).names       # a new variable: a new instance
    ['mu', 'tau']
    """
    key = (
        tuple(id(v) for v in model.free_RVs),
        tuple(id(v) for v in model.value_vars),
        tuple(id(v) for v in model.potentials),
        tuple(id(v) for v in model.observed_RVs),
    )
    try:
        hit = _CACHE.get(model)
    except TypeError:  # not weak-referenceable: no cache
        return ModelFunctions(model)
    if hit is not None and hit[0] == key:
        return hit[1]
    fns = ModelFunctions(model)
    _CACHE[model] = (key, fns)
    return fns


# ---- feedback ----------------------------------------------------------------------------------


def _check_shapes(model, post, names) -> None:
    """Refuse trace variables whose per-draw shape is not the model's (before: PyTensor's
    "Bad input argument to pytensor function ... at index 0" from inside the gradient)."""
    try:
        shapes = model.eval_rv_shapes()
    except Exception:  # noqa: BLE001 - a model PyMC cannot size up front: PyTensor will say
        return
    for name in names:
        want = tuple(int(k) for k in shapes.get(name, ()))
        got = tuple(int(k) for k in post[name].shape[2:])
        if name in shapes and got != want:
            raise ValueError(
                f"idata: posterior variable {name!r} has shape {got} per draw, but the model's "
                f"{name!r} has shape {want}; is this the trace of another model (or of the "
                "model with other data or dims)?"
            )


@contextmanager
def _announce(message: str, enabled: bool):
    """A stage that cannot count its work (a PyTensor compile): ``message ...`` on stderr once it
    has run :data:`stein_coreset._progress.DELAY_S` seconds, and its time when it ends; nothing
    for a shorter stage or when not ``enabled``."""
    if not enabled:
        yield
        return
    t0 = time.perf_counter()
    shown = threading.Event()

    def show():
        shown.set()
        _progress.stage(f"{message} ...")

    timer = threading.Timer(_progress.DELAY_S, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        if shown.is_set():
            _progress.stage(f"{message}: done in {time.perf_counter() - t0:.1f} s")


# ---- the trace in the unconstrained space --------------------------------------------------------


@dataclass
class TraceScores:
    """The draws of a trace in the model's unconstrained space with their scores.

    Row ``i`` of ``X`` / ``S`` comes from ``source_group[i]`` ("warmup_posterior" or "posterior"),
    chain ``source_chain[i]``, draw ``source_draw[i]`` (its position in that group); the rows are
    each chain's warm-up then its posterior draws, chain after chain (the sampler's order).

    Attributes
    ----------
    X, S : (n, d) float64 arrays
        The unconstrained draws and the gradients of the joint log density there: the input
        :func:`stein_coreset.compress` takes.
    source_group : (n,) array of str
        ``"warmup_posterior"`` or ``"posterior"``, per row.
    source_chain, source_draw : (n,) int64 arrays
        The chain of each row, and its draw within that chain's group.
    functions : ModelFunctions
        The compiled maps used (``functions.to_constrained`` maps rows back).
    time_scores_s, time_transform_s, time_compile_s : float
        Seconds spent evaluating the gradient, the forward transform, and building and
        compiling the model's functions (0 after the first call on a model, but for the
        cache lookup).

    See Also
    --------
    trace_scores : builds it.
    compress_trace : compresses the rows and maps them back to the trace's variables.

    Examples
    --------
    >>> import numpy as np, pymc as pm, xarray as xr
    >>> from stein_coreset.integrations.pymc import trace_scores
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    >>> draws = xr.Dataset({"mu": (("chain", "draw"), np.arange(6.0).reshape(2, 3))})
    >>> trace = xr.DataTree.from_dict({"warmup_posterior": draws, "posterior": draws + 10})
    >>> ts = trace_scores(trace, model)
    >>> ts.X[:, 0]                                  # chain 0: warm-up, posterior; then chain 1
    array([ 0.,  1.,  2., 10., 11., 12.,  3.,  4.,  5., 13., 14., 15.])
    >>> ts.source_group[[0, 3]], ts.source_chain[[3, 6]], ts.source_draw[[3, 6]]
    (array(['warmup_posterior', 'posterior'], dtype='<U16'), array([0, 1]), array([0, 0]))
    """

    X: np.ndarray
    S: np.ndarray
    source_group: np.ndarray
    source_chain: np.ndarray
    source_draw: np.ndarray
    functions: ModelFunctions
    time_scores_s: float
    time_transform_s: float
    time_compile_s: float = 0.0


def _check_model(model):
    try:
        import pymc as pm
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            "stein_coreset.integrations.pymc needs PyMC: pip install 'stein_coreset[pymc]'"
        ) from exc
    if model is None:
        model = pm.modelcontext(None)
    if not isinstance(model, pm.Model):
        raise TypeError(f"model must be a pymc.Model, got {type(model).__name__}")
    return model


def _model_var_names(model) -> set:
    names = {rv.name for rv in model.free_RVs}
    names |= {v.name for v in model.deterministics}
    names |= {v.name for v in model.value_vars}
    return names


def trace_scores(
    idata,
    model=None,
    *,
    include_warmup: bool = True,
    batch_size: int = 1024,
    progress: bool | None = None,
) -> TraceScores:
    """The draws of ``idata`` in ``model``'s unconstrained space and the model's scores there.

    Parameters
    ----------
    idata : arviz.InferenceData (or DataTree)
        Output of ``pm.sample``; ``discard_tuned_samples=False`` keeps the warm-up.
    model : pymc.Model, optional
        Default: the model of the enclosing ``with`` block.
    include_warmup : bool
        Take the ``warmup_posterior`` group too, when it is present.
    batch_size : int
        Draws per call of the vectorised gradient.
    progress : bool, optional
        Say on stderr when PyTensor compiles (``time_compile_s``; ~1 s with a warm PyTensor
        cache, tens of seconds on a cold one) and show a bar over the scoring batches, for
        stages longer than half a second. Default: on when stderr is a terminal.

    Returns
    -------
    TraceScores
        The rows X, their scores S and where each row came from.

    Raises
    ------
    ValueError
        When the trace and the model disagree (a variable missing from either, a per-draw
        shape that differs), naming the variable.

    Notes
    -----
    Cost: building and compiling the model's forward-transform, gradient and backward-transform
    graphs once per model (``time_compile_s``; later calls on the same model reuse them), then
    one compiled forward-transform call and one compiled gradient call per batch of
    ``batch_size`` draws (a loop over draws when the model's graph cannot be vectorised):
    ``time_transform_s`` and ``time_scores_s``.

    See Also
    --------
    compress_trace : scores, compression and the way back in one call.
    stein_coreset.integrations.jax.scores_from_logdensity : the same for a JAX log density.

    Examples
    --------
    The usual input is a ``pm.sample`` result; hand-made draws stand in for one here:

    >>> import numpy as np, pymc as pm, xarray as xr
    >>> from stein_coreset.integrations.pymc import trace_scores
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    ...     sigma = pm.HalfNormal("sigma", 1.0)
    >>> rng = np.random.default_rng(0)
    >>> trace = xr.DataTree.from_dict({"posterior": xr.Dataset({
    ...     "mu": (("chain", "draw"), rng.standard_normal((2, 50))),
    ...     "sigma": (("chain", "draw"), rng.lognormal(0.0, 0.5, (2, 50)))})})
    >>> ts = trace_scores(trace, model)
    >>> ts.X.shape                                  # columns: mu, log sigma
    (100, 2)
    >>> sigma = trace["posterior"]["sigma"].values.ravel()
    >>> bool(np.allclose(ts.X[:, 1], np.log(sigma)))
    True
    >>> bool(np.allclose(ts.S, np.c_[-ts.X[:, 0], 1 - sigma ** 2]))   # grad of log p, Jacobian in
    True
    """

    model = _check_model(model)
    batch_size = val.check_int(batch_size, "batch_size", lo=1)
    include_warmup = val.check_bool(include_warmup, "include_warmup")
    progress = _progress.resolve(progress)
    post = _az.get_group(idata, "posterior")
    groups = ["posterior"]
    if include_warmup and _az.has_group(idata, "warmup_posterior"):
        groups = ["warmup_posterior", "posterior"]
    tc = time.perf_counter()
    fns = model_functions(model)  # graph building: part of the one-off cost, as the compile
    t_build = time.perf_counter() - tc
    known = _model_var_names(model)
    extra = [v for v in post.data_vars if v not in known]
    if extra:
        raise ValueError(
            f"idata: posterior variables {extra} are not in the model (free variables: "
            f"{fns.names}); is this the trace of another model?"
        )
    missing = [v for v in fns.names if v not in post.data_vars]
    if missing:
        raise ValueError(
            f"model: free variables {missing} are missing from the trace's posterior group "
            f"({list(post.data_vars)})"
        )
    _check_shapes(model, post, fns.names)
    tc = time.perf_counter()
    # compile (or fetch from the per-model cache) before timing evaluation; the backward map
    # too, so that a compress_trace call compiles in one stage
    with _announce("compress_trace: compiling the model's gradient (PyTensor)", progress):
        fns.compile()
    t_compile = t_build + time.perf_counter() - tc
    t0 = time.perf_counter()
    blocks, src_group, src_chain, src_draw = [], [], [], []
    datasets = {g: _az.get_group(idata, g) for g in groups}
    n_chains = int(post.sizes["chain"])
    for g, ds in datasets.items():
        if int(ds.sizes["chain"]) != n_chains:
            raise ValueError(f"idata: {g!r} has {ds.sizes['chain']} chains, posterior {n_chains}")
    for c in range(n_chains):
        for g, ds in datasets.items():
            nd = int(ds.sizes["draw"])
            if nd == 0:
                continue
            vals = [
                np.asarray(ds[name].transpose("chain", "draw", ...).values[c], dtype=np.float64)
                for name in fns.names
            ]
            blocks.append(vals)
            src_group += [g] * nd
            src_chain.append(np.full(nd, c))
            src_draw.append(np.arange(nd))
    if not blocks:  # before: numpy's "need at least one array to concatenate"
        sizes = ", ".join(f"{g}: {int(ds.sizes['chain'])} chains x {int(ds.sizes['draw'])} "
                          "draws" for g, ds in datasets.items())
        raise ValueError(f"idata: the trace holds no draws ({sizes}); there is nothing to score")
    constrained = [np.concatenate([b[j] for b in blocks]) for j in range(len(fns.names))]
    X = fns.to_unconstrained(constrained, batch_size)
    t1 = time.perf_counter()
    S = fns.scores(X, batch_size, progress=f"scores of {X.shape[0]} draws" if progress else None)
    t2 = time.perf_counter()
    return TraceScores(
        X=X,
        S=S,
        source_group=np.asarray(src_group),
        source_chain=np.concatenate(src_chain).astype(np.int64),
        source_draw=np.concatenate(src_draw).astype(np.int64),
        functions=fns,
        time_scores_s=t2 - t1,
        time_transform_s=t1 - t0,
        time_compile_s=t_compile,
    )


#: Equal-weight draws a simplex result's posterior resamples by default (``pm.sample``'s draws).
_DEFAULT_DRAWS = 1000


# ---- compress_trace ----------------------------------------------------------------------------


def compress_trace(
    idata,
    model=None,
    *,
    size: int,
    method: str,
    random_seed=None,
    var_names=None,
    include_warmup: bool = True,
    draws: int | None = None,
    resample_equal: bool = False,
    nan_policy: str = "raise",
    batch_size: int = 1024,
    progress: bool | None = None,
    seed=None,
    **compress_options,
):
    """Compress a PyMC trace to a debiased ``InferenceData`` that ArviZ cannot misread.

    Parameters
    ----------
    idata : arviz.InferenceData (or DataTree)
        Output of ``pm.sample`` (with ``discard_tuned_samples=False`` to keep the warm-up).
    model : pymc.Model, optional
        The model that produced the trace (default: the enclosing ``with`` block's).
    size : int
        Coreset size m.
    method : str
        A :func:`stein_coreset.compress` method: "st", "skt", "lskt" (equal weights), "sr",
        "lsr" (simplex), "sc", "lsc" (signed), or a baseline ("standard", "kt", "rt", "ct", ...).
    random_seed : None, int or numpy.random.Generator
        As in ``pm.sample``. ``seed`` is accepted as an alias.
    var_names : list of str, optional
        Posterior variables to return (default: all of the trace's). The scores always use
        every free variable of the model.
    include_warmup : bool
        Compress the ``warmup_posterior`` draws too (default), when the trace kept them.
    draws : int, optional
        Simplex weights only: the number of equal-weight draws the posterior group resamples
        from the weighted coreset (default: 1000, ``pm.sample``'s default, or ``size`` if
        larger). Each point's share of the draws is within about 1/draws of its weight, so
        ``az.summary`` of the draws follows the weighted figures to resampling error (eight
        schools, size 40: 0.7-1.1 in one mean with 40 draws, 0.02-0.03 with 1000); the exact figures
        are the weighted ones of :func:`stein_coreset.integrations.arviz.summary`.
    resample_equal : bool
        Kept for compatibility: a simplex result's posterior is always its equal-weight
        resample. ``True`` refuses signed weights (``ValueError``) instead of returning a
        result without a posterior.
    nan_policy : {"raise", "omit"}
        Draws where the trace or the model's gradient is NaN/inf: error, or dropped and counted
        in ``attrs["n_dropped"]``.
    batch_size : int
        Draws per call of the compiled, vectorised gradient.
    progress : bool, optional
        Feedback on stderr for the stages longer than half a second: the PyTensor compile of
        the first call on a model (``time_compile_s``), the scoring batches and the
        compression. Default: on when stderr is a terminal, as PyMC's bars.
    **compress_options
        Passed to :func:`stein_coreset.compress` (``kernel``, ``rank``, ``tau``, ``n_threads``,
        method options).

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or ``xarray.DataTree`` (ArviZ >= 1, or a DataTree in):

    - ``posterior``: equal-weight draws, so that every ArviZ summary and plot reads a sample:
      for equal-weight methods (``st``, ``skt``, ``lskt``, ``standard``, ``kt``, ...) the
      coreset's ``size`` draws, repeats kept; for simplex weights (``sr``, ``lsr``, ``rt``) an
      equal-weight resample of ``draws`` draws from the weighted coreset (stratified residual
      resampling, App. E.3, deterministic for a seed); for signed weights (``sc``, ``lsc``,
      ``ct``) **no posterior group**: signed weights are not draws, and no tool that ignores
      weights can use them (use :func:`stein_coreset.integrations.arviz.summary`,
      :func:`~stein_coreset.integrations.arviz.weighted_mean` or the ``coreset`` group).
      Each draw is its own chain of one draw (dims ``chain`` = draws, ``draw`` = 1): a coreset
      is not a Markov chain, and in this layout ArviZ's ESS, MCSE and R-hat are NaN rather
      than numbers that look meaningful. Free variables are the backward-transformed coreset
      points, deterministics come from the source draws; names, dims and coords are the
      trace's. No weight variable.
    - ``coreset``: the weighted support, dim ``point``: the variables at each distinct point,
      ``weight`` (summing to 1; counts/size for equal results; negative entries possible for
      signed results), and the source of every point: ``source_chain``, ``source_draw``,
      ``source_warmup``; ``draw_point`` (chain, draw) says which point each posterior draw is.
    - ``sample_stats``: the sampler statistics of the posterior draws' sources (from
      ``warmup_sample_stats`` for warm-up draws), when the trace has them and there is a
      posterior.
    - ``observed_data``, ``constant_data``: carried over.

    ``posterior.attrs`` and ``coreset.attrs`` hold ``stein_coreset_method``, ``coreset_kind``
    (of the method's weights), ``ksd``, ``coreset_size`` (distinct points), ``posterior_draws``
    (0 without a posterior), ``posterior_is`` (what the posterior group holds, in words),
    ``n_input``, ``n_warmup_input``, ``n_dropped``, ``time_compile_s`` (building and
    compiling the model's PyTensor functions: the first call on a model only),
    ``time_transform_s``, ``time_scores_s`` (evaluating the compiled gradient),
    ``time_compress_s``, ``scores_vectorized``, ``resampled_equal``, ``bandwidth``,
    ``preconditioner``, and ``note_warmup`` when the compressed draws hold no warm-up
    (the trace was sampled with ``discard_tuned_samples=True``, PyMC's default, or
    ``include_warmup=False``): a note, also printed with the progress feedback, and not a
    warning, since post-warm-up draws are a fine input; the debiased methods can use the
    warm-up too.

    Notes
    -----
    Cost: scores as in :func:`trace_scores`, then the method's cost (``docs/choosing_a_method.md``).
    :func:`stein_coreset.integrations.arviz.summary` gives the weighted mean, sd and interval
    of every kind of result, with no MCMC diagnostics; ``az.summary(result, kind="stats")`` is
    the plain summary of the posterior draws (exact for equal-weight methods, within
    resampling error for simplex ones).

    See Also
    --------
    stein_coreset.compress : the compression itself, on (n, d) arrays.
    stein_coreset.integrations.arviz.summary : weighted figures of the result.
    stein_coreset.integrations.arviz.weighted_mean : the weighted means alone.

    Examples
    --------
    Two chains whose first 20 draws (the warm-up, kept by
    ``pm.sample(discard_tuned_samples=False)``) sit far from the posterior's mass, stood in
    for by hand-made draws; the target is mu ~ N(0, 1):

    >>> import numpy as np, pymc as pm, xarray as xr
    >>> from stein_coreset.integrations.arviz import get_group, has_group, weighted_mean
    >>> from stein_coreset.integrations.pymc import compress_trace
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    ...     sigma = pm.HalfNormal("sigma", 1.0)
    >>> rng = np.random.default_rng(0)
    >>> def draws(shift, n):
    ...     return xr.Dataset({
    ...         "mu": (("chain", "draw"), shift + rng.standard_normal((2, n))),
    ...         "sigma": (("chain", "draw"), rng.lognormal(shift / 2, 0.5, (2, n)))})
    >>> trace = xr.DataTree.from_dict({"warmup_posterior": draws(3.0, 20),
    ...                                "posterior": draws(0.0, 60)})
    >>> res = compress_trace(trace, model, size=10, method="skt", random_seed=0)
    >>> cs = get_group(res, "coreset")
    >>> cs.attrs["coreset_kind"], cs.attrs["n_input"], cs.attrs["n_warmup_input"]
    ('equal', 160, 40)
    >>> dict(get_group(res, "posterior").sizes)     # 10 draws, each its own chain
    {'chain': 10, 'draw': 1}
    >>> round(float(weighted_mean(res)["mu"]), 2)   # the warm-up's pull is corrected
    0.04
    >>> std = compress_trace(trace, model, size=10, method="standard", random_seed=0)
    >>> round(float(weighted_mean(std)["mu"]), 2)   # thinning alone keeps it
    0.66
    >>> has_group(compress_trace(trace, model, size=10, method="sc"), "posterior")
    False

    Signed weights (``"sc"``) are not draws, hence no ``posterior`` group: read them with
    :func:`~stein_coreset.integrations.arviz.summary`.
    """
    import xarray as xr


    if seed is not None:
        if random_seed is not None:
            raise TypeError("give random_seed or its alias seed, not both")
        random_seed = seed
    val.check_choice(nan_policy, "nan_policy", ("raise", "omit"))
    resample_equal = val.check_bool(resample_equal, "resample_equal")
    include_warmup = val.check_bool(include_warmup, "include_warmup")
    if draws is not None:
        draws = val.check_int(draws, "draws", lo=1)
    progress = _progress.resolve(progress)
    rng = val.check_random_state(random_seed, "random_seed")
    post = _az.get_group(idata, "posterior")
    if var_names is None:
        var_names = list(post.data_vars)
    else:
        var_names = [var_names] if isinstance(var_names, str) else list(var_names)
        missing = [v for v in var_names if v not in post.data_vars]
        if missing:
            raise ValueError(
                f"var_names: {missing} are not in the trace's posterior ({list(post.data_vars)})"
            )
    ts = trace_scores(
        idata, model, include_warmup=include_warmup, batch_size=batch_size, progress=progress
    )
    X, S = ts.X, ts.S
    bad = ~(np.isfinite(X).all(axis=1) & np.isfinite(S).all(axis=1))
    n_bad = int(bad.sum())
    if n_bad and nan_policy == "raise":
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"the model's gradient (or the draw) is NaN or inf at {n_bad} of {X.shape[0]} draws, "
            f"first at {ts.source_group[i]} chain {ts.source_chain[i]} draw "
            f"{ts.source_draw[i]}; pass nan_policy='omit' to drop them"
        )
    t0 = time.perf_counter()
    res = compress(
        X, S, size=size, method=method, seed=rng, nan_policy=nan_policy, progress=progress,
        **compress_options,
    )
    t_compress = time.perf_counter() - t0
    kind = res.kind
    if resample_equal and kind == "constant":
        raise ValueError(
            f"resample_equal: method {method!r} returned signed ('constant') weights, "
            "which cannot be resampled; use a method with simplex weights (sr, lsr) or "
            "equal weights (st, skt, lskt)"
        )
    support = np.asarray(res.indices, dtype=np.int64)
    w = np.asarray(res.weights, dtype=np.float64)
    k = support.size
    if kind == "equal":  # the sample: the m draws, repeats kept
        rows = np.asarray(res.draw_indices, dtype=np.int64)
        posterior_is = f"the coreset's {rows.size} draws (equal weights, repeats kept)"
    elif kind == "simplex":  # an equal-weight resample of the weighted support
        n_draws = max(_DEFAULT_DRAWS, int(size)) if draws is None else draws
        rows = np.asarray(res.resample_equal(n_draws, rng).draw_indices, np.int64)
        posterior_is = (
            f"an equal-weight resample ({rows.size} draws, stratified residual resampling) of "
            f"the {k}-point simplex-weighted coreset: its means are within resampling error of "
            "the weighted ones; the exact weights are in the 'coreset' group "
            "(stein_coreset.integrations.arviz.summary / weighted_mean read them)"
        )
    else:  # signed weights are not draws
        rows = None
        posterior_is = (
            f"absent: method {method!r} gives signed weights, which are not draws, so no "
            "posterior is offered to tools that ignore weights; use "
            "stein_coreset.integrations.arviz.summary(result) or weighted_mean(result), or the "
            "weighted points of the 'coreset' group"
        )
    draw_point = None
    if rows is not None:
        where = {int(r): j for j, r in enumerate(support)}
        draw_point = np.array([where[int(r)] for r in rows], dtype=np.int64)

    fns = ts.functions
    tc = time.perf_counter()
    with _announce("compress_trace: compiling the model's backward transform", progress):
        fns.compile(("backward",))  # compiled by trace_scores already, unless called alone
    t_compile = ts.time_compile_s + time.perf_counter() - tc
    constrained = dict(zip(fns.names, fns.to_constrained(X[support], batch_size), strict=True))
    src_group, src_chain, src_draw = (
        ts.source_group[support], ts.source_chain[support], ts.source_draw[support]
    )
    groups = {g: _az.get_group(idata, g) for g in set(src_group.tolist())}

    def from_sources(group_of, name, template):
        vals = [
            group_of[g][name].transpose("chain", "draw", ...).values[c, dr]
            for g, c, dr in zip(src_group, src_chain, src_draw, strict=True)
        ]
        return np.stack(vals) if k else np.empty((0,) + template.shape[2:], template.dtype)

    m = 0 if rows is None else rows.size
    cd = ("chain", "draw")
    draw_coords = {"chain": np.arange(m), "draw": np.arange(1)}
    point_vars, draw_vars, var_coords = {}, {}, {}
    for name in var_names:
        da = post[name].transpose("chain", "draw", ...)
        dims = tuple(da.dims[2:])
        if name in constrained:
            vals = np.asarray(constrained[name]).reshape((k,) + da.shape[2:])
        else:  # deterministics: from the source draws
            vals = from_sources(groups, name, da)
        vals = vals.astype(da.dtype, copy=False)
        point_vars[name] = (("point",) + dims, vals)
        if draw_point is not None:
            draw_vars[name] = (cd + dims, vals[draw_point][:, None])
        for dim in dims:
            if dim in post.coords:
                var_coords[dim] = post.coords[dim].values

    n_warm = int((ts.source_group == "warmup_posterior").sum())
    attrs = {
        "stein_coreset_method": method,
        "coreset_kind": kind,
        "ksd": float("nan") if res.ksd is None else float(res.ksd),
        "coreset_size": int(k),
        "posterior_draws": int(m),
        "posterior_is": posterior_is,
        "n_input": int(X.shape[0]),
        "n_warmup_input": n_warm,
        "n_dropped": int(res.info.get("n_dropped", 0)),
        "time_transform_s": float(ts.time_transform_s),
        "time_compile_s": float(t_compile),
        "time_scores_s": float(ts.time_scores_s),
        "time_compress_s": float(t_compress),
        "scores_vectorized": int(bool(ts.functions.vectorized.get("dlogp", False))),
        "resampled_equal": int(kind == "simplex"),
        "bandwidth": float(res.info.get("bandwidth", math.nan)),
        "preconditioner": str(res.info.get("preconditioner", "")),
    }
    note = _warmup_note(idata, include_warmup, n_warm)
    if note:  # not a warning: pm.sample discards the warm-up by default, a fine input
        attrs["note_warmup"] = note
        if progress:
            _progress.stage(f"compress_trace: {note}")
    out = {}
    if draw_point is not None:
        out["posterior"] = xr.Dataset(
            draw_vars, coords={**draw_coords, **var_coords}, attrs=attrs
        )
    cs_vars = dict(point_vars)
    cs_vars.update(
        {
            "weight": (("point",), w),
            "source_chain": (("point",), src_chain),
            "source_draw": (("point",), src_draw),
            "source_warmup": (("point",), (src_group == "warmup_posterior").astype(np.int64)),
        }
    )
    cs_coords = {"point": np.arange(k), **var_coords}
    if draw_point is not None:
        cs_vars["draw_point"] = (cd, draw_point[:, None])
        cs_coords.update(draw_coords)
    out["coreset"] = xr.Dataset(cs_vars, coords=cs_coords, attrs=attrs)
    stats = {"posterior": "sample_stats", "warmup_posterior": "warmup_sample_stats"}
    if draw_point is not None and all(_az.has_group(idata, stats[g]) for g in groups):
        sgroups = {g: _az.get_group(idata, stats[g]) for g in groups}
        first = sgroups[next(iter(sgroups))]
        svars = {}
        for name in first.data_vars:
            if not all(name in ds.data_vars for ds in sgroups.values()):
                continue
            da = first[name]
            if da.dims[:2] != ("chain", "draw"):
                if "chain" not in da.dims or "draw" not in da.dims:
                    continue
                da = da.transpose("chain", "draw", ...)
            vals = from_sources(sgroups, name, da)
            svars[name] = (cd + tuple(da.dims[2:]), vals[draw_point][:, None])
        out["sample_stats"] = xr.Dataset(svars, coords=draw_coords)
    for g in ("observed_data", "constant_data"):
        if _az.has_group(idata, g):
            out[g] = _az.get_group(idata, g)
    return _az.to_idata(out, like=idata)


def _warmup_note(idata, include_warmup: bool, n_warm: int) -> str:
    """Why the compressed draws hold no warm-up, in words ("" when they hold some)."""
    if n_warm:
        return ""
    keep = (
        "the debiased methods correct burn-in, so a trace sampled with "
        "pm.sample(..., discard_tuned_samples=False) gives them its warm-up draws to choose "
        "from as well"
    )
    if _az.has_group(idata, "warmup_posterior"):
        if not include_warmup:
            return f"the trace's warm-up draws were left out (include_warmup=False); {keep}"
        return f"the trace's warm-up group is empty; {keep}"
    tuning = None
    for g in ("posterior", "sample_stats"):
        if _az.has_group(idata, g):
            tuning = _az.get_group(idata, g).attrs.get("tuning_steps", tuning)
    if tuning:
        return (
            f"the trace has no warm-up draws: pm.sample ran {int(tuning)} tuning steps per "
            f"chain and discarded them (discard_tuned_samples=True); only the post-warm-up "
            f"draws were compressed; {keep}"
        )
    return (
        "the trace has no warm-up draws (no 'warmup_posterior' group): only its post-warm-up "
        f"draws were compressed; {keep}"
    )

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
import time
import weakref
from dataclasses import dataclass

import numpy as np

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

    def __call__(self, key: str, args: list, batch_size: int = 1024) -> list:
        """Evaluate map ``key`` on batched inputs, each ``(n, *shape)``; list of ``(n, *shape)``."""
        n = int(args[0].shape[0])
        single = self.single(key)
        fn = self._batched_fn(key)
        if fn is not None and key not in self.vectorized:
            ok = False
            try:
                got = fn(*[a[:1] for a in args])
                want = single(*[a[0] for a in args])
                ok = all(
                    np.allclose(
                        np.asarray(g)[0], np.asarray(w), rtol=1e-10, atol=1e-12, equal_nan=True
                    )
                    for g, w in zip(got, want, strict=True)
                )
            except Exception:  # noqa: BLE001
                ok = False
            self.vectorized[key] = ok
        if fn is not None and self.vectorized.get(key):
            parts = [fn(*[a[i : i + batch_size] for a in args]) for i in range(0, n, batch_size)]
            return [np.concatenate([np.asarray(p[j]) for p in parts]) for j in range(len(parts[0]))]
        self.vectorized[key] = False
        rows = [single(*[a[i] for a in args]) for i in range(n)]
        return [np.stack([np.asarray(r[j]) for r in rows]) for j in range(len(rows[0]))]

    # flat views -------------------------------------------------------------------------------
    def split(self, X):
        """(n, d) unconstrained rows -> list of (n, *value_shape) arrays."""
        n, out, start = X.shape[0], [], 0
        for shape, size in zip(self.value_shapes, self.value_sizes, strict=True):
            out.append(np.ascontiguousarray(X[:, start : start + size]).reshape((n,) + shape))
            start += size
        return out

    def join(self, parts) -> np.ndarray:
        n = parts[0].shape[0]
        return np.concatenate(
            [np.asarray(p, dtype=np.float64).reshape(n, -1) for p in parts], axis=1
        )

    def to_unconstrained(self, constrained: list, batch_size: int = 1024) -> np.ndarray:
        return self.join(self("forward", constrained, batch_size))

    def to_constrained(self, X, batch_size: int = 1024) -> list:
        return self("backward", self.split(X), batch_size)

    def scores(self, X, batch_size: int = 1024) -> np.ndarray:
        """(n, d) gradients of the joint log density at the unconstrained rows of X."""
        return self.join(self("dlogp", self.split(X), batch_size))

    def logp(self, X, batch_size: int = 1024) -> np.ndarray:
        return np.asarray(self("logp", self.split(X), batch_size)[0]).reshape(-1)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def model_functions(model) -> ModelFunctions:
    """The model's :class:`ModelFunctions`, cached per model (and its current set of variables),
    so compressing one trace with several methods compiles the gradient once."""
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


# ---- the trace in the unconstrained space --------------------------------------------------------


@dataclass
class TraceScores:
    """The draws of a trace in the model's unconstrained space with their scores.

    Row ``i`` of ``X`` / ``S`` comes from ``source_group[i]`` ("warmup_posterior" or "posterior"),
    chain ``source_chain[i]``, draw ``source_draw[i]`` (its position in that group); the rows are
    each chain's warm-up then its posterior draws, chain after chain (the sampler's order).
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
    idata, model=None, *, include_warmup: bool = True, batch_size: int = 1024
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

    Notes
    -----
    Cost: one compiled forward-transform call and one compiled gradient call per batch of
    ``batch_size`` draws (a loop over draws when the model's graph cannot be vectorised).
    """
    from .. import _validation as val

    model = _check_model(model)
    batch_size = val.check_int(batch_size, "batch_size", lo=1)
    include_warmup = val.check_bool(include_warmup, "include_warmup")
    post = _az.get_group(idata, "posterior")
    groups = ["posterior"]
    if include_warmup and _az.has_group(idata, "warmup_posterior"):
        groups = ["warmup_posterior", "posterior"]
    fns = model_functions(model)
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
    tc = time.perf_counter()
    for key in ("forward", "dlogp"):  # compile (or fetch from cache) before timing evaluation
        fns.single(key)
        fns._batched_fn(key)
    t_compile = time.perf_counter() - tc
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
    constrained = [np.concatenate([b[j] for b in blocks]) for j in range(len(fns.names))]
    X = fns.to_unconstrained(constrained, batch_size)
    t1 = time.perf_counter()
    S = fns.scores(X, batch_size)
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
    resample_equal: bool = False,
    nan_policy: str = "raise",
    batch_size: int = 1024,
    seed=None,
    **compress_options,
):
    """Compress a PyMC trace to a debiased ``InferenceData`` that ArviZ summarises correctly.

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
        "lsr" (simplex), "sc", "lsc" (signed), or a baseline ("standard", "kt", ...).
    random_seed : None, int or numpy.random.Generator
        As in ``pm.sample``. ``seed`` is accepted as an alias.
    var_names : list of str, optional
        Posterior variables to return (default: all of the trace's). The scores always use
        every free variable of the model.
    include_warmup : bool
        Compress the ``warmup_posterior`` draws too (default), when the trace kept them.
    resample_equal : bool
        Turn simplex weights into ``size`` equally weighted draws (App. E.3, stratified
        residual resampling; deterministic for a seed), for tools that ignore weights.
    nan_policy : {"raise", "omit"}
        Draws where the trace or the model's gradient is NaN/inf: error, or dropped and counted
        in ``attrs["n_dropped"]``.
    batch_size : int
        Draws per call of the compiled, vectorised gradient.
    **compress_options
        Passed to :func:`stein_coreset.compress` (``kernel``, ``rank``, ``tau``, ``n_threads``,
        method options).

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or ``xarray.DataTree`` (ArviZ >= 1, or a DataTree in):

    - ``posterior``: one chain; for an equal-weighted result (``st``, ``skt``, ``lskt``,
      baselines, or ``resample_equal=True``) ``size`` draws, repeats kept, so ``az.summary``
      and every plot are the coreset's; for simplex / signed weights one draw per support
      point. Free variables are the backward-transformed coreset points, deterministics come
      from the source draws; names, dims and coords are the trace's. No weight variable.
    - ``coreset``: the weights ``weight`` (chain, draw) (1/size each for equal results; use them
      for simplex / signed results: ``(w * post[v]).sum(("chain", "draw"))``), and the source
      of every draw: ``source_chain``, ``source_draw``, ``source_warmup``.
    - ``sample_stats``: the sampler statistics of the kept draws (from ``warmup_sample_stats``
      for warm-up draws), when the trace has them.
    - ``observed_data``, ``constant_data``: carried over.

    ``posterior.attrs`` (and ``coreset.attrs``) hold ``stein_coreset_method``, ``coreset_kind``,
    ``ksd``, ``coreset_size``, ``n_input``, ``n_warmup_input``, ``n_dropped``,
    ``time_compile_s`` / ``time_transform_s`` / ``time_scores_s`` / ``time_compress_s``,
    ``bandwidth``, ``preconditioner``.

    Notes
    -----
    Cost: scores as in :func:`trace_scores`, then the method's cost (``docs/choosing_a_method.md``).
    ESS and R-hat of a coreset mean nothing (it is not a Markov chain): ``az.summary(...,
    kind="stats")``.
    """
    import xarray as xr

    from .. import _validation as val
    from ..compress import compress

    if seed is not None:
        if random_seed is not None:
            raise TypeError("give random_seed or its alias seed, not both")
        random_seed = seed
    val.check_choice(nan_policy, "nan_policy", ("raise", "omit"))
    resample_equal = val.check_bool(resample_equal, "resample_equal")
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
    ts = trace_scores(idata, model, include_warmup=include_warmup, batch_size=batch_size)
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
        X, S, size=size, method=method, seed=rng, nan_policy=nan_policy, **compress_options
    )
    t_compress = time.perf_counter() - t0
    kind = res.kind
    if resample_equal and kind != "equal":
        if kind == "constant":
            raise ValueError(
                f"resample_equal: method {method!r} returned signed ('constant') weights, "
                "which cannot be resampled; use a method with simplex weights (sr, lsr) or "
                "equal weights (st, skt, lskt)"
            )
        res = res.resample_equal(int(size), rng)
    if res.kind == "equal":  # the sample view: the m draws, repeats kept
        idx = np.asarray(res.draw_indices, dtype=np.int64)
        w = np.full(idx.size, 1.0 / idx.size)
    else:  # the support view: weights in the coreset group
        idx = np.asarray(res.indices, dtype=np.int64)
        w = np.asarray(res.weights, dtype=np.float64)

    fns = ts.functions
    constrained = dict(zip(fns.names, fns.to_constrained(X[idx], batch_size), strict=True))
    k = idx.size
    src_group, src_chain, src_draw = ts.source_group[idx], ts.source_chain[idx], ts.source_draw[idx]
    coords = {"chain": np.arange(1), "draw": np.arange(k)}
    groups = {g: _az.get_group(idata, g) for g in set(src_group.tolist())}

    def from_sources(group_of, name, template):
        vals = [
            group_of[g][name].transpose("chain", "draw", ...).values[c, dr]
            for g, c, dr in zip(src_group, src_chain, src_draw, strict=True)
        ]
        return np.stack(vals) if k else np.empty((0,) + template.shape[2:], template.dtype)

    data_vars = {}
    for name in var_names:
        da = post[name].transpose("chain", "draw", ...)
        dims = tuple(da.dims[2:])
        if name in constrained:
            vals = np.asarray(constrained[name]).reshape((k,) + da.shape[2:])
        else:  # deterministics: from the source draws
            vals = from_sources(groups, name, da)
        data_vars[name] = (("chain", "draw") + dims, vals[None].astype(da.dtype, copy=False))
        for dim in dims:
            if dim in post.coords:
                coords[dim] = post.coords[dim].values
    attrs = {
        "stein_coreset_method": method,
        "coreset_kind": res.kind,
        "ksd": float("nan") if res.ksd is None else float(res.ksd),
        "coreset_size": int(k),
        "n_input": int(X.shape[0]),
        "n_warmup_input": int((ts.source_group == "warmup_posterior").sum()),
        "n_dropped": int(res.info.get("n_dropped", 0)),
        "time_transform_s": float(ts.time_transform_s),
        "time_compile_s": float(ts.time_compile_s),
        "time_scores_s": float(ts.time_scores_s),
        "time_compress_s": float(t_compress),
        "scores_vectorized": int(bool(ts.functions.vectorized.get("dlogp", False))),
        "resampled_equal": int(res.kind == "equal" and kind != "equal"),
        "bandwidth": float(res.info.get("bandwidth", math.nan)),
        "preconditioner": str(res.info.get("preconditioner", "")),
    }
    out = {"posterior": xr.Dataset(data_vars, coords=coords, attrs=attrs)}
    cd = ("chain", "draw")
    out["coreset"] = xr.Dataset(
        {
            "weight": (cd, w[None]),
            "source_chain": (cd, src_chain[None]),
            "source_draw": (cd, src_draw[None]),
            "source_warmup": (cd, (src_group == "warmup_posterior").astype(np.int64)[None]),
        },
        coords={"chain": np.arange(1), "draw": np.arange(k)},
        attrs=attrs,
    )
    stats = {"posterior": "sample_stats", "warmup_posterior": "warmup_sample_stats"}
    if all(_az.has_group(idata, stats[g]) for g in groups):
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
            svars[name] = (cd + tuple(da.dims[2:]), vals[None])
        out["sample_stats"] = xr.Dataset(
            svars, coords={"chain": np.arange(1), "draw": np.arange(k)}
        )
    for g in ("observed_data", "constant_data"):
        if _az.has_group(idata, g):
            out[g] = _az.get_group(idata, g)
    return _az.to_idata(out, like=idata)

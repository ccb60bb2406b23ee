"""A PyMC trace in, a debiased weighted ArviZ ``InferenceData`` out.

:func:`compress_trace` takes the draws of every free variable (all chains, and the warm-up when
it was kept: the burn-in is exactly what the debiased methods correct), maps them to the
unconstrained space PyMC samples in (the model's value variables and their transforms), evaluates
the scores with the model's own compiled gradient of the joint log density (vectorised over
draws, in batches), runs :func:`stein_coreset.compress` and maps the coreset back to the
constrained space. The model's compiled maps are :mod:`.pymc_model`'s, the result is built by
:func:`stein_coreset.integrations.results.compress_scored` (the same for every integration). PyMC,
PyTensor, ArviZ and xarray are imported lazily.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import _progress
from .. import _validation as val
from . import arviz as _az
from .pymc_model import ModelFunctions, model_functions
from .results import ScoredDraws, announce, check_options, check_var_names, compress_scored

__all__ = ["TraceScores", "trace_scores", "compress_trace", "ModelFunctions", "model_functions"]


# ---- checks --------------------------------------------------------------------------------------


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


# ---- the trace in the unconstrained space --------------------------------------------------------


@dataclass
class TraceScores(ScoredDraws):
    """The draws of a trace in the model's unconstrained space with their scores: a
    :class:`~stein_coreset.integrations.results.ScoredDraws` that keeps the model's maps.

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
    names, to_constrained
        The model's free variables and the map of rows to them (``functions``' backward map).
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

    functions: ModelFunctions | None = None


def _check_model(model):
    try:
        import pymc as pm
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            "stein_coreset.integrations.pymc needs PyMC: pip install -r requirements/pymc.txt "
            "in the stein_coreset source tree (or pip install pymc)"
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
    with announce("compress_trace: compiling the model's gradient (PyTensor)", progress):
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
        names=list(fns.names),
        to_constrained=lambda rows: dict(
            zip(fns.names, fns.to_constrained(rows, batch_size), strict=True)
        ),
        time_scores_s=t2 - t1,
        time_transform_s=t1 - t0,
        time_compile_s=t_compile,
        scores_vectorized=bool(fns.vectorized.get("dlogp", False)),
        scores_dtype=str(np.result_type(*[v.dtype for v in fns.values])),
        functions=fns,
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
    if seed is not None:
        if random_seed is not None:
            raise TypeError("give random_seed or its alias seed, not both")
        random_seed = seed
    resample_equal, include_warmup, draws, progress = check_options(
        nan_policy, resample_equal, include_warmup, draws, progress)
    rng = val.check_random_state(random_seed, "random_seed")
    var_names = check_var_names(_az.get_group(idata, "posterior"), var_names)
    ts = trace_scores(
        idata, model, include_warmup=include_warmup, batch_size=batch_size, progress=progress
    )
    return compress_scored(
        ts, idata, size=size, method=method, rng=rng, var_names=var_names, draws=draws,
        resample_equal=resample_equal, nan_policy=nan_policy, progress=progress,
        note_warmup=_warmup_note(idata, include_warmup, ts.n_warmup), caller="compress_trace",
        **compress_options,
    )


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

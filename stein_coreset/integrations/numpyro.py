"""A NumPyro ``MCMC`` in, a debiased weighted ArviZ result out.

:func:`compress_mcmc` takes the samples of a NumPyro ``MCMC`` and its model (with the model's
arguments of the last ``run``), the warm-up draws too when they were collected
(``mcmc.warmup(..., collect_warmup=True)``), maps every latent site to the unconstrained space
NumPyro samples in (``numpyro.infer.util.unconstrain_fn``), evaluates the scores there as the
gradient of minus the model's potential energy (Jacobian terms included), compresses, maps the
coreset back with ``constrain_fn`` and returns what
:func:`stein_coreset.integrations.pymc.compress_trace` returns (built by the same code,
:func:`stein_coreset.integrations.results.compress_scored`).

Everything is traced inside JAX's float64 mode (``x64=True``, the default), the model's
arguments included: a NumPyro model sampled in float32 with integer indices (``a[county]``) then
evaluates without the ``int32`` / ``int64`` mismatch that tracing part of it outside that mode
gives. JAX, NumPyro, ArviZ and xarray are imported lazily.
"""

from __future__ import annotations

import time

import numpy as np

from .. import _progress
from .. import _validation as val
from . import arviz as _az
from .results import ScoredDraws, announce, check_options, check_var_names, compress_scored

__all__ = ["compress_mcmc", "mcmc_scores"]


def _model_and_args(mcmc, model_args, model_kwargs):
    try:
        import numpyro  # noqa: F401
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            "stein_coreset.integrations.numpyro needs NumPyro: pip install -r "
            "requirements/numpyro.txt in the stein_coreset source tree (or pip install numpyro)"
        ) from exc
    if not (hasattr(mcmc, "get_samples") and hasattr(mcmc, "sampler")):
        raise TypeError(f"mcmc: expected a numpyro.infer.MCMC, got {type(mcmc).__name__}")
    model = getattr(mcmc.sampler, "model", None)
    if model is None:
        raise TypeError(
            "mcmc: its kernel was built from a potential_fn, not a model, so there is no model "
            "to map the draws with; use stein_coreset.integrations.jax.scores_from_logdensity "
            "on the unconstrained draws (docs/integrations.md, BlackJAX)"
        )
    if model_args is None:
        model_args = getattr(mcmc, "_args", ())  # the arguments of the last run
    if model_kwargs is None:
        model_kwargs = getattr(mcmc, "_kwargs", {})
    return model, tuple(model_args), dict(model_kwargs)


def _host(tree):
    """The arrays of a pytree as new NumPy arrays, so that they enter a float64 trace afresh.

    A copy, not a view: JAX keeps the device copy of a NumPy array it has seen (under the
    sampler's 32-bit mode, ``int32``) and reuses it for the same object inside the float64
    mode, where adding it to a 64-bit index fails ("lax.add requires arguments to have the
    same dtypes, got int32, int64")."""
    import jax

    return jax.tree.map(
        lambda a: np.array(a, copy=True) if isinstance(a, (jax.Array, np.ndarray)) else a, tree
    )


def _sites(model, args, kwargs, params):
    """The latent (sampled, not observed) sites of the model at ``params``."""
    from numpyro import handlers

    tr = handlers.trace(
        handlers.seed(handlers.substitute(model, data=params), rng_seed=0)
    ).get_trace(*args, **kwargs)
    latent, discrete = [], []
    for name, site in tr.items():
        if site["type"] == "sample" and not site["is_observed"]:
            support = getattr(site["fn"], "support", None)
            (discrete if getattr(support, "is_discrete", False) else latent).append(name)
    if discrete:
        raise _Refused(
            f"mcmc: latent sites {discrete} are discrete; the scores need a gradient, so every "
            "latent site must be continuous (NumPyro enumerates discrete sites out: their "
            "values are not in the samples the scores are evaluated at)"
        )
    return latent


def _groups(samples: dict, warmup: dict | None, extra: dict) -> dict:
    """ArviZ groups (as az.from_numpyro names them) of NumPyro samples by chain."""
    import xarray as xr

    def ds(d):
        return xr.Dataset({
            name: (("chain", "draw") + tuple(f"{name}_dim_{i}" for i in range(v.ndim - 2)), v)
            for name, v in d.items()
        })

    groups = {"posterior": ds(samples)}
    if warmup:
        groups["warmup_posterior"] = ds(warmup)
    stats = {k: v for k, v in extra.items() if v.ndim >= 2}
    if stats:
        groups["sample_stats"] = ds(stats)
    return groups


def mcmc_scores(
    mcmc,
    *,
    warmup: dict | None = None,
    model_args=None,
    model_kwargs=None,
    include_warmup: bool = True,
    batch_size: int = 1024,
    x64: bool = True,
    progress: bool | None = None,
):
    """The draws of a NumPyro ``MCMC`` in its unconstrained space and the scores there.

    Parameters
    ----------
    mcmc : numpyro.infer.MCMC
        After ``run``; its kernel built from a model (``NUTS(model)``, ``HMC(model)``, ...).
    warmup : dict, optional
        The warm-up draws, ``mcmc.get_samples(group_by_chain=True)`` taken after
        ``mcmc.warmup(..., collect_warmup=True)`` (NumPyro keeps one set of samples, so they
        must be taken before ``run``).
    model_args, model_kwargs : tuple, dict, optional
        The model's arguments (default: those of the last ``mcmc.run``).
    include_warmup : bool
        Use ``warmup`` when given.
    batch_size : int
        Draws per call of the compiled, vectorised maps.
    x64 : bool
        Trace and evaluate the model in float64 (default), inside JAX's float64 mode for this
        call only; ``False`` evaluates in float32 (JAX's 32-bit mode, for this call only).
    progress : bool, optional
        Feedback on stderr (the JIT compile, a bar over the batches). Default: on when stderr
        is a terminal.

    Returns
    -------
    ScoredDraws
        ``X``, ``S`` (float64), the source of every row, ``names`` (the latent sites) and
        ``to_constrained`` (``constrain_fn``).

    Notes
    -----
    Cost: one JIT compile of each map (forward, gradient, backward), then one vectorised call
    per batch: O(n) gradient evaluations.

    See Also
    --------
    compress_mcmc : scores, compression and the way back in one call.

    Examples
    --------
    >>> import jax, numpy as np, numpyro, numpyro.distributions as dist
    >>> from numpyro.infer import MCMC, NUTS
    >>> from stein_coreset.integrations.numpyro import mcmc_scores
    >>> def model():
    ...     numpyro.sample("s", dist.Exponential(1.0))
    >>> mcmc = MCMC(NUTS(model), num_warmup=50, num_samples=50, progress_bar=False)
    >>> mcmc.run(jax.random.PRNGKey(0))
    >>> sd = mcmc_scores(mcmc)
    >>> sd.X.dtype, sd.X.shape                      # log s, the unconstrained coordinate
    (dtype('float64'), (50, 1))
    >>> bool(np.allclose(sd.S[:, 0], 1.0 - np.exp(sd.X[:, 0])))   # d/du (u - e^u)
    True
    """
    model, args, kwargs = _model_and_args(mcmc, model_args, model_kwargs)
    batch_size = val.check_int(batch_size, "batch_size", lo=1)
    include_warmup = val.check_bool(include_warmup, "include_warmup")
    x64 = val.check_bool(x64, "x64")
    progress = _progress.resolve(progress)
    samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    warm = None
    if warmup is not None and include_warmup:
        if not isinstance(warmup, dict):
            raise TypeError(
                "warmup: expected the dict mcmc.get_samples(group_by_chain=True) gives after "
                f"mcmc.warmup(..., collect_warmup=True), got {type(warmup).__name__}"
            )
        warm = {k: np.asarray(v) for k, v in warmup.items()}
    args, kwargs = _host(args), _host(kwargs)
    try:
        return _evaluate(model, args, kwargs, samples, warm, x64, batch_size, progress)
    except (TypeError, ValueError) as exc:
        if not x64 or isinstance(exc, _Refused):
            raise
        first = exc
    # a model that fails in float64 after a 32-bit run (a NumPy array it closes over, whose
    # int32 device copy JAX keeps across modes; jax.clear_caches() does not drop it): the
    # sampler's own precision (float32), said in attrs["note_scores"]
    scored = _evaluate(model, args, kwargs, samples, warm, False, batch_size, progress)
    scored.note = (
        f"the model could not be evaluated in float64 ({type(first).__name__}: "
        f"{str(first).splitlines()[0][:160]}); the scores are in the sampler's float32"
    )
    return scored


def _precision(x64: bool):
    """JAX's float64 mode on (``x64``) or off for a ``with`` block, whatever the global
    setting: the fallback evaluates a float32 run in float32 even where another library has
    turned ``jax_enable_x64`` on for the whole process."""
    import jax

    ctx = getattr(jax, "enable_x64", None)
    if ctx is None:  # older JAX
        from jax.experimental import disable_x64, enable_x64

        return enable_x64() if x64 else disable_x64()
    return ctx(bool(x64))


class _Refused(ValueError):
    """A check of the samples against the model failed (not a JAX error)."""


def _evaluate(model, args, kwargs, samples, warm, x64, batch_size, progress) -> ScoredDraws:
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import constrain_fn, potential_energy, unconstrain_fn

    t0 = time.perf_counter()
    with _precision(x64):
        first = {k: v[0, 0] for k, v in samples.items()}
        latent = _sites(model, args, kwargs, first)
        missing = [s for s in latent if s not in samples]
        if missing:
            raise _Refused(
                f"mcmc: latent sites {missing} are not in its samples ({sorted(samples)}); "
                "were they excluded from collection?"
            )
        if warm is not None:
            gone = [s for s in latent if s not in warm]
            if gone:
                raise _Refused(f"warmup: latent sites {gone} are missing")
        nc = next(iter(samples.values())).shape[0]
        blocks, src_group, src_chain, src_draw = [], [], [], []
        groups = [("warmup_posterior", warm)] if warm is not None else []
        groups.append(("posterior", samples))
        for c in range(nc):
            for g, d in groups:
                nd = d[latent[0]].shape[1]
                if nd == 0:
                    continue
                blocks.append({s: d[s][c] for s in latent})
                src_group += [g] * nd
                src_chain.append(np.full(nd, c))
                src_draw.append(np.arange(nd))
        params = {s: np.concatenate([b[s] for b in blocks]) for s in latent}
        n = params[latent[0]].shape[0]
        ftype = jnp.float64 if x64 else jnp.float32
        params = {s: jnp.asarray(v, dtype=ftype) for s, v in params.items()}
        flat0, unravel = ravel_pytree(unconstrain_fn(model, args, kwargs,
                                                     {s: v[0] for s, v in params.items()}))

        def forward(p):
            return ravel_pytree(unconstrain_fn(model, args, kwargs, p))[0]

        def logp(x):
            return -potential_energy(model, args, kwargs, unravel(x))

        def backward(x):
            return constrain_fn(model, args, kwargs, unravel(x))

        fwd, grad, bwd = (jax.jit(jax.vmap(f)) for f in (forward, jax.grad(logp), backward))
        with announce("compress_mcmc: compiling the model's maps (JAX)", progress):
            x0 = fwd({s: v[:1] for s, v in params.items()})
            grad(x0).block_until_ready()
        t_compile = time.perf_counter() - t0
        t0 = time.perf_counter()
        X = np.concatenate([
            np.asarray(fwd({s: v[i:i + batch_size] for s, v in params.items()}), np.float64)
            for i in range(0, n, batch_size)
        ])
        t1 = time.perf_counter()
        starts = range(0, n, batch_size)
        if progress:
            starts = _progress.progress_bar(starts, f"scores of {n} draws (batches of "
                                                    f"{batch_size})")
        S = np.concatenate([
            np.asarray(grad(jnp.asarray(X[i:i + batch_size], dtype=flat0.dtype)), np.float64)
            for i in starts
        ])
        t2 = time.perf_counter()

    def to_constrained(rows):
        with _precision(x64):
            out = bwd(jnp.asarray(rows, dtype=flat0.dtype))
            return {s: np.asarray(out[s], dtype=np.float64) for s in latent}

    return ScoredDraws(
        X=X,
        S=S,
        source_group=np.asarray(src_group),
        source_chain=np.concatenate(src_chain).astype(np.int64),
        source_draw=np.concatenate(src_draw).astype(np.int64),
        names=list(latent),
        to_constrained=to_constrained,
        time_scores_s=t2 - t1,
        time_transform_s=t1 - t0,
        time_compile_s=t_compile,
        scores_vectorized=True,
        scores_dtype=str(np.dtype(flat0.dtype)),
    )


def compress_mcmc(
    mcmc,
    *,
    size: int,
    method: str,
    seed=None,
    warmup: dict | None = None,
    model_args=None,
    model_kwargs=None,
    var_names=None,
    include_warmup: bool = True,
    draws: int | None = None,
    resample_equal: bool = False,
    nan_policy: str = "raise",
    batch_size: int = 1024,
    x64: bool = True,
    progress: bool | None = None,
    **compress_options,
):
    """Compress a NumPyro ``MCMC`` to a debiased ``InferenceData`` that ArviZ cannot misread.

    Parameters
    ----------
    mcmc : numpyro.infer.MCMC
        After ``run``, its kernel built from a model (``NUTS(model)``).
    size : int
        Coreset size m.
    method : str
        A :func:`stein_coreset.compress` method: "st", "skt", "lskt" (equal weights), "sr",
        "lsr" (simplex), "sc", "lsc" (signed), or a baseline ("standard", "kt", ...).
    seed : None, int or numpy.random.Generator
        Seed of the compression (and of a simplex result's resample).
    warmup : dict, optional
        The warm-up draws to compress as well: ``mcmc.get_samples(group_by_chain=True)``
        taken after ``mcmc.warmup(key, ..., collect_warmup=True)`` and before ``mcmc.run``.
    model_args, model_kwargs : tuple, dict, optional
        The model's arguments (default: those of the last ``mcmc.run``).
    var_names : list of str, optional
        Posterior variables to return (default: every site in the samples; deterministic
        sites come from the source draws).
    include_warmup : bool
        Compress ``warmup`` too (default).
    draws : int, optional
        Simplex weights only: equal-weight draws resampled for the posterior group (default
        1000, or ``size`` if larger).
    resample_equal : bool
        ``True`` refuses signed weights (``ValueError``) instead of returning no posterior.
    nan_policy : {"raise", "omit"}
        Draws whose score is NaN/inf: error naming the first, or dropped and counted in
        ``attrs["n_dropped"]``.
    batch_size : int
        Draws per call of the compiled, vectorised gradient.
    x64 : bool
        Evaluate the model in float64 (default; see :func:`mcmc_scores`).
    progress : bool, optional
        Feedback on stderr. Default: on when stderr is a terminal.
    **compress_options
        Passed to :func:`stein_coreset.compress`.

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ >= 1)
        What :func:`stein_coreset.integrations.pymc.compress_trace` returns: ``posterior``
        (equal-weight draws only; none for signed weights), ``coreset`` (the weighted
        support), ``sample_stats`` of the kept draws (NumPyro's extra fields, when every kept
        draw has them), and the same attributes. Read it with
        :func:`stein_coreset.integrations.arviz.summary`.

    Notes
    -----
    Cost: :func:`mcmc_scores`, then the method's cost.

    See Also
    --------
    mcmc_scores : the unconstrained draws and their scores alone.
    stein_coreset.integrations.arviz.summary : weighted mean, sd and interval of the result.
    stein_coreset.integrations.jax.scores_from_logdensity : BlackJAX and other JAX samplers.

    Examples
    --------
    A radon-style model with integer indexing (``docs/integrations.md`` runs a longer one):

    >>> import jax, numpy as np, numpyro, numpyro.distributions as dist
    >>> from numpyro.infer import MCMC, NUTS
    >>> from stein_coreset.integrations.arviz import get_group, summary
    >>> from stein_coreset.integrations.numpyro import compress_mcmc
    >>> county = np.random.default_rng(0).integers(0, 3, 60)
    >>> y = np.random.default_rng(1).normal(county, 1.0)
    >>> def model(county, y):
    ...     mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    ...     tau = numpyro.sample("tau", dist.HalfNormal(2.0))
    ...     a = numpyro.sample("a", dist.Normal(mu, tau).expand([3]))
    ...     numpyro.sample("y", dist.Normal(a[county], 1.0), obs=y)
    >>> mcmc = MCMC(NUTS(model), num_warmup=30, num_samples=100, progress_bar=False)
    >>> mcmc.warmup(jax.random.PRNGKey(0), county, y, collect_warmup=True)
    >>> warmup = mcmc.get_samples(group_by_chain=True)
    >>> mcmc.run(jax.random.PRNGKey(1), county, y)
    >>> res = compress_mcmc(mcmc, size=20, method="skt", seed=0, warmup=warmup)
    >>> cs = get_group(res, "coreset")
    >>> cs.attrs["n_input"], cs.attrs["n_warmup_input"], dict(get_group(res, "posterior").sizes)
    (130, 30, {'chain': 20, 'draw': 1, 'a_dim_0': 3})
    """
    resample_equal, include_warmup, draws, progress = check_options(
        nan_policy, resample_equal, include_warmup, draws, progress)
    rng = val.check_random_state(seed, "seed")
    scored = mcmc_scores(
        mcmc, warmup=warmup, model_args=model_args, model_kwargs=model_kwargs,
        include_warmup=include_warmup, batch_size=batch_size, x64=x64, progress=progress,
    )
    samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    extra = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
    warm = ({k: np.asarray(v) for k, v in warmup.items()}
            if warmup is not None and include_warmup else None)
    source = _groups(samples, warm, extra)
    var_names = check_var_names(_az.get_group(source, "posterior"), var_names)
    note = (
        "no warm-up draws were given: only the post-warm-up draws were compressed; the "
        "debiased methods correct burn-in, so mcmc.warmup(key, ..., collect_warmup=True) and "
        "warmup=mcmc.get_samples(group_by_chain=True) before mcmc.run give them the warm-up "
        "to choose from as well"
    )
    return compress_scored(
        scored, source, size=size, method=method, rng=rng, var_names=var_names, draws=draws,
        resample_equal=resample_equal, nan_policy=nan_policy, progress=progress,
        note_warmup=note, caller="compress_mcmc", **compress_options,
    )

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
model go through one code path (:mod:`.stan_model`); the draws are read into ArviZ groups by
:mod:`.stan_draws`; the result is built by :mod:`.results`. PyStan, httpstan, ArviZ and xarray
are imported lazily.
"""

from __future__ import annotations

import time

import numpy as np

from .. import _progress
from .. import _validation as val
from . import arviz as _az
from .results import ScoredDraws, check_options, check_var_names, compress_scored
from .stan_draws import fit_groups, read_cmdstan_csv
from .stan_model import PyStanModel, StanVariables, stan_functions

__all__ = [
    "compress_fit", "fit_scores", "stan_functions", "PyStanModel", "StanVariables",
    "fit_groups", "read_cmdstan_csv",
]


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
    resample_equal, include_warmup, draws, progress = check_options(
        nan_policy, resample_equal, include_warmup, draws, progress)
    rng = val.check_random_state(seed, "seed")
    source = fit_groups(fit)
    var_names = check_var_names(_az.get_group(source, "posterior"), var_names)
    scored = fit_scores(source, model, include_warmup=include_warmup, batch_size=batch_size,
                        progress=progress)
    note = (  # compress_scored shows it only when no warm-up row was compressed
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

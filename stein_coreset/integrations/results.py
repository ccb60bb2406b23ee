"""From scored draws to the debiased ArviZ result: the one result builder of every integration.

Each sampler's module reads its own draws (:mod:`~stein_coreset.integrations.pymc` a PyMC trace,
:mod:`~stein_coreset.integrations.stan` a Stan fit, :mod:`~stein_coreset.integrations.numpyro` a
NumPyro ``MCMC``) into a :class:`ScoredDraws`: the draws in the sampler's unconstrained space,
their scores there, where each row came from, and the sampler's own map back to the constrained
variables. :func:`compress_scored` compresses those rows and builds what every integration
returns: an ``InferenceData`` (or ``DataTree``) whose ``posterior`` holds equal-weight draws only,
whose ``coreset`` group holds the weighted support, with the sources' sampler statistics and data
carried over. ArviZ and xarray are imported lazily.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .. import _progress
from .. import _validation as val
from ..compress import compress
from . import arviz as _az

__all__ = ["ScoredDraws", "compress_scored", "check_options", "check_var_names", "announce",
           "DEFAULT_DRAWS"]

#: Equal-weight draws a simplex result's posterior resamples by default (``pm.sample``'s draws).
DEFAULT_DRAWS = 1000

#: The group a warm-up draw comes from, and the sampler-statistics group of each source group.
WARMUP = "warmup_posterior"
_STATS = {"posterior": "sample_stats", WARMUP: "warmup_sample_stats"}


@dataclass
class ScoredDraws:
    """Draws of a sampler in its unconstrained space, with their scores and their sources.

    Row ``i`` of ``X`` / ``S`` comes from ``source_group[i]`` (``"warmup_posterior"`` or
    ``"posterior"``), chain ``source_chain[i]``, draw ``source_draw[i]`` (its position in that
    group); the rows are each chain's warm-up then its posterior draws, chain after chain (the
    sampler's order). Every integration builds one and hands it to :func:`compress_scored`.

    Attributes
    ----------
    X, S : (n, d) float64 arrays
        The unconstrained draws and the gradients of the log density there, Jacobian terms
        included (the density the sampler targets): the input :func:`stein_coreset.compress`
        takes.
    source_group : (n,) array of str
        ``"warmup_posterior"`` or ``"posterior"``, per row.
    source_chain, source_draw : (n,) int64 arrays
        The chain of each row, and its draw within that chain's group.
    names : list of str
        The variables ``to_constrained`` gives (the sampler's free parameters); other
        variables of the source (deterministics, transformed parameters, generated quantities)
        are taken from the source draws.
    to_constrained : callable
        ``(k, d)`` unconstrained rows -> dict name -> ``(k, *shape)`` constrained values, through
        the sampler's own transforms.
    time_scores_s, time_transform_s, time_compile_s : float
        Seconds spent evaluating the gradient, mapping the draws to the unconstrained space,
        and building or compiling the model's functions.
    scores_vectorized : bool
        Whether the scores were evaluated in batches (True) or draw by draw.
    scores_dtype : str
        The precision the model was evaluated in (``S`` itself is always float64).
    note : str
        Anything the reader should know about the scores (a fallback taken), or ``""``.

    See Also
    --------
    compress_scored : compresses the rows and builds the ArviZ result.
    stein_coreset.integrations.pymc.trace_scores : a PyMC trace's.
    stein_coreset.integrations.stan.fit_scores : a Stan fit's.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.integrations.results import ScoredDraws
    >>> X = np.array([[0.0], [1.0], [2.0]])
    >>> sd = ScoredDraws(X=X, S=-X, source_group=np.array(["posterior"] * 3),
    ...                  source_chain=np.zeros(3, np.int64), source_draw=np.arange(3),
    ...                  names=["mu"], to_constrained=lambda rows: {"mu": rows[:, 0]})
    >>> sd.n, sd.d, sd.n_warmup
    (3, 1, 0)
    """

    X: np.ndarray
    S: np.ndarray
    source_group: np.ndarray
    source_chain: np.ndarray
    source_draw: np.ndarray
    names: list
    to_constrained: Callable
    time_scores_s: float = 0.0
    time_transform_s: float = 0.0
    time_compile_s: float = 0.0
    scores_vectorized: bool = True
    scores_dtype: str = "float64"
    note: str = ""

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        """Number of unconstrained columns."""
        return int(self.X.shape[1])

    @property
    def n_warmup(self) -> int:
        """Rows that come from the warm-up."""
        return int((self.source_group == WARMUP).sum())


@contextmanager
def announce(message: str, enabled: bool):
    """Feedback for a stage that cannot count its work (a compile).

    Prints ``message ...`` on stderr once the stage has run half a second, and its time when
    it ends; nothing for a shorter stage or when not ``enabled``.

    Parameters
    ----------
    message : str
        What the stage does, e.g. ``"compress_trace: compiling the model's gradient"``.
    enabled : bool
        Whether to say anything.

    Examples
    --------
    >>> from stein_coreset.integrations.results import announce
    >>> with announce("a short stage", True):   # under half a second: silent
    ...     pass
    """
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


def check_options(nan_policy, resample_equal, include_warmup, draws, progress) -> tuple:
    """The options every integration's entry point takes (``compress_trace``, ``compress_fit``,
    ``compress_mcmc``), checked before any draw is scored, so a typo fails at once and not
    after minutes of gradients: ``(resample_equal, include_warmup, draws, progress)``."""
    val.check_choice(nan_policy, "nan_policy", ("raise", "omit"))
    resample_equal = val.check_bool(resample_equal, "resample_equal")
    include_warmup = val.check_bool(include_warmup, "include_warmup")
    if draws is not None:
        draws = val.check_int(draws, "draws", lo=1)
    return resample_equal, include_warmup, draws, _progress.resolve(progress)


def check_var_names(post, var_names) -> list:
    """``var_names`` as a list of variables of the posterior group ``post`` (default: all).

    Raises ``ValueError`` naming the variables the posterior lacks.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.results import check_var_names
    >>> post = xr.Dataset({"mu": (("chain", "draw"), np.zeros((1, 2)))})
    >>> check_var_names(post, None), check_var_names(post, "mu")
    (['mu'], ['mu'])
    """
    if var_names is None:
        return list(post.data_vars)
    var_names = [var_names] if isinstance(var_names, str) else list(var_names)
    missing = [v for v in var_names if v not in post.data_vars]
    if missing:
        raise ValueError(
            f"var_names: {missing} are not in the posterior ({list(post.data_vars)})"
        )
    return var_names


def compress_scored(
    scored: ScoredDraws,
    source,
    *,
    size: int,
    method: str,
    rng: np.random.Generator,
    var_names=None,
    draws: int | None = None,
    resample_equal: bool = False,
    nan_policy: str = "raise",
    progress: bool = False,
    note_warmup: str = "",
    caller: str = "compress",
    **compress_options,
):
    """Compress scored draws and build the ArviZ result every integration returns.

    Parameters
    ----------
    scored : ScoredDraws
        The rows to compress, their scores and sources.
    source : arviz.InferenceData, xarray.DataTree or dict of str to xarray.Dataset
        The draws the rows come from, as groups: ``posterior`` (names, dims, coords, dtypes,
        and the values of the variables not in ``scored.names``), ``warmup_posterior`` when
        rows come from it, and optionally ``sample_stats`` / ``warmup_sample_stats``,
        ``observed_data``, ``constant_data`` (carried over).
    size, method : int, str
        As in :func:`stein_coreset.compress`.
    rng : numpy.random.Generator
        The seed of the compression (and of a simplex result's resample).
    var_names : list of str, optional
        Posterior variables to return (default: all of the source's).
    draws : int, optional
        Simplex weights only: equal-weight draws resampled for the posterior group (default:
        1000, ``DEFAULT_DRAWS``, or ``size`` if larger).
    resample_equal : bool
        ``True`` refuses signed weights (``ValueError``) instead of returning a result without
        a posterior.
    nan_policy : {"raise", "omit"}
        Rows where a draw or its score is NaN/inf: error naming the first one, or dropped and
        counted in ``attrs["n_dropped"]``.
    progress : bool
        Feedback on stderr (the compression's own, and ``note_warmup``).
    note_warmup : str
        Why the rows hold no warm-up, in the sampler's words (stored as ``attrs["note_warmup"]``
        when there are no warm-up rows).
    caller : str
        The public function's name, for the messages.
    **compress_options
        Passed to :func:`stein_coreset.compress`.

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ >= 1, or a DataTree source)
        The groups and attributes documented by
        :func:`stein_coreset.integrations.pymc.compress_trace`.

    Notes
    -----
    Cost: the method's (``docs/choosing_a_method.md``), then one call of
    ``scored.to_constrained`` on the k support points and O(k d) copies.

    See Also
    --------
    stein_coreset.integrations.pymc.compress_trace : the PyMC entry point.
    stein_coreset.integrations.stan.compress_fit : the Stan entry point.
    stein_coreset.integrations.numpyro.compress_mcmc : the NumPyro entry point.

    Examples
    --------
    Draws of N(0, 1) shifted by 1 (a biased sample), scored exactly:

    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.arviz import get_group, weighted_mean
    >>> from stein_coreset.integrations.results import ScoredDraws, compress_scored
    >>> x = 1.0 + np.random.default_rng(0).standard_normal((2, 100))
    >>> source = {"posterior": xr.Dataset({"mu": (("chain", "draw"), x)})}
    >>> X = x.reshape(-1, 1)
    >>> sd = ScoredDraws(X=X, S=-X, source_group=np.array(["posterior"] * 200),
    ...                  source_chain=np.repeat([0, 1], 100),
    ...                  source_draw=np.tile(np.arange(100), 2),
    ...                  names=["mu"], to_constrained=lambda rows: {"mu": rows[:, 0]})
    >>> res = compress_scored(sd, source, size=20, method="skt", rng=np.random.default_rng(0))
    >>> dict(get_group(res, "posterior").sizes)
    {'chain': 20, 'draw': 1}
    >>> abs(float(weighted_mean(res)["mu"])) < 0.2     # the shift is corrected
    True
    """
    import xarray as xr

    post = _az.get_group(source, "posterior")
    var_names = check_var_names(post, var_names)
    X, S = scored.X, scored.S
    bad = ~(np.isfinite(X).all(axis=1) & np.isfinite(S).all(axis=1))
    n_bad = int(bad.sum())
    if n_bad and nan_policy == "raise":
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"the model's gradient (or the draw) is NaN or inf at {n_bad} of {X.shape[0]} draws, "
            f"first at {scored.source_group[i]} chain {scored.source_chain[i]} draw "
            f"{scored.source_draw[i]}; pass nan_policy='omit' to drop them"
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
    rows, posterior_is = _posterior_rows(res, kind, method, size, draws, rng)
    draw_point = None
    if rows is not None:
        where = {int(r): j for j, r in enumerate(support)}
        draw_point = np.array([where[int(r)] for r in rows], dtype=np.int64)

    constrained = scored.to_constrained(X[support])
    src_group, src_chain, src_draw = (
        scored.source_group[support], scored.source_chain[support], scored.source_draw[support]
    )
    groups = {g: _az.get_group(source, g) for g in set(src_group.tolist())}

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

    n_warm = scored.n_warmup
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
        "time_transform_s": float(scored.time_transform_s),
        "time_compile_s": float(scored.time_compile_s),
        "time_scores_s": float(scored.time_scores_s),
        "time_compress_s": float(t_compress),
        "scores_vectorized": int(bool(scored.scores_vectorized)),
        "scores_dtype": str(scored.scores_dtype),
        "resampled_equal": int(kind == "simplex"),
        "bandwidth": float(res.info.get("bandwidth", math.nan)),
        "preconditioner": str(res.info.get("preconditioner", "")),
    }
    if scored.note:
        attrs["note_scores"] = scored.note
        if progress:
            _progress.stage(f"{caller}: {scored.note}")
    if note_warmup and not n_warm:  # a note, not a warning: post-warm-up draws are fine input
        attrs["note_warmup"] = note_warmup
        if progress:
            _progress.stage(f"{caller}: {note_warmup}")
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
            "source_warmup": (("point",), (src_group == WARMUP).astype(np.int64)),
        }
    )
    cs_coords = {"point": np.arange(k), **var_coords}
    if draw_point is not None:
        cs_vars["draw_point"] = (cd, draw_point[:, None])
        cs_coords.update(draw_coords)
    out["coreset"] = xr.Dataset(cs_vars, coords=cs_coords, attrs=attrs)
    if draw_point is not None and all(_az.has_group(source, _STATS[g]) for g in groups):
        stats = _sample_stats({g: _az.get_group(source, _STATS[g]) for g in groups},
                              from_sources)
        out["sample_stats"] = xr.Dataset(
            {name: (cd + dims, vals[draw_point][:, None]) for name, (dims, vals) in stats.items()},
            coords=draw_coords,
        )
    for g in ("observed_data", "constant_data"):
        if _az.has_group(source, g):
            out[g] = _az.get_group(source, g)
    return _az.to_idata(out, like=source if not isinstance(source, dict) else None)


def _posterior_rows(res, kind, method, size, draws, rng):
    """The rows the posterior group holds (None for signed weights) and what it is, in words."""
    k = np.asarray(res.indices).size
    if kind == "equal":  # the sample: the m draws, repeats kept
        rows = np.asarray(res.draw_indices, dtype=np.int64)
        return rows, f"the coreset's {rows.size} draws (equal weights, repeats kept)"
    if kind == "simplex":  # an equal-weight resample of the weighted support
        n_draws = max(DEFAULT_DRAWS, int(size)) if draws is None else draws
        rows = np.asarray(res.resample_equal(n_draws, rng).draw_indices, np.int64)
        return rows, (
            f"an equal-weight resample ({rows.size} draws, stratified residual resampling) of "
            f"the {k}-point simplex-weighted coreset: its means are within resampling error of "
            "the weighted ones; the exact weights are in the 'coreset' group "
            "(stein_coreset.integrations.arviz.summary / weighted_mean read them)"
        )
    return None, (  # signed weights are not draws
        f"absent: method {method!r} gives signed weights, which are not draws, so no "
        "posterior is offered to tools that ignore weights; use "
        "stein_coreset.integrations.arviz.summary(result) or weighted_mean(result), or the "
        "weighted points of the 'coreset' group"
    )


def _sample_stats(sgroups: dict, from_sources) -> dict:
    """name -> (dims, values at the support points) of the statistics every group has."""
    first = sgroups[next(iter(sgroups))]
    out = {}
    for name in first.data_vars:
        if not all(name in ds.data_vars for ds in sgroups.values()):
            continue
        da = first[name]
        if da.dims[:2] != ("chain", "draw"):
            if "chain" not in da.dims or "draw" not in da.dims:
                continue
            da = da.transpose("chain", "draw", ...)
        out[name] = (tuple(da.dims[2:]), from_sources(sgroups, name, da))
    return out

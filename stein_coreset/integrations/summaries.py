"""The weighted figures of a coreset result: its support, weighted means, sds and intervals.

Every integration (``compress_trace``, ``compress_fit``, ``compress_mcmc``) stores the weighted
support in the result's ``coreset`` group; the functions here read it, for every kind of weights
(equal, simplex, signed). Re-exported by :mod:`stein_coreset.integrations.arviz`, where the
documentation names them. pandas and xarray are imported lazily.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _validation as val
from .containers import get_group

__all__ = ["coreset_support", "weighted_mean", "summary"]


def coreset_support(idata, var_names=None, group: str = "posterior"):
    """The weighted support of a :func:`~stein_coreset.integrations.pymc.compress_trace`
    result: its distinct points and their weights.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        A ``compress_trace`` result (any kind: equal, simplex or signed weights).
    var_names : str or list of str, optional
        Variables to return (default: every variable stored with the support).
    group : str
        Only for results written before the support had its own ``point`` dimension, whose
        ``coreset`` group held the weights of the ``group`` draws.

    Returns
    -------
    points : xarray.Dataset
        The variables at the support points, dims ``(point, *dims)``.
    weights : xarray.DataArray
        ``(point,)``; they sum to 1 (negative entries for signed weights).

    Notes
    -----
    O(m d): no copy beyond the selection.

    See Also
    --------
    weighted_mean : the weighted means of these points.
    summary : weighted mean, sd and interval per entry.
    stein_coreset.integrations.pymc.compress_trace : the results this reads.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.arviz import coreset_support
    >>> cs = xr.Dataset({"weight": ("point", [0.25, 0.75]), "mu": ("point", [0.0, 4.0])})
    >>> points, w = coreset_support(xr.DataTree.from_dict({"coreset": cs}))
    >>> float((w * points["mu"]).sum())
    3.0
    """
    cs = get_group(idata, "coreset")
    if "weight" not in cs.data_vars:
        raise ValueError("idata: its 'coreset' group has no 'weight' variable")
    w = cs["weight"]
    if "point" in w.dims:
        source = cs
        bookkeeping = {"weight", "source_chain", "source_draw", "source_warmup", "draw_point"}
        names_all = [v for v in cs.data_vars if v not in bookkeeping and "point" in cs[v].dims]
    else:  # the older layout: weights aligned with the draws of `group`
        source = get_group(idata, group).stack(point=("chain", "draw")).drop_vars(
            ["point", "chain", "draw"], errors="ignore"
        )
        w = w.stack(point=("chain", "draw")).drop_vars(
            ["point", "chain", "draw"], errors="ignore"
        )
        names_all = list(source.data_vars)
    if var_names is None:
        names = names_all
    else:
        names = [var_names] if isinstance(var_names, str) else list(var_names)
        missing = [v for v in names if v not in names_all]
        if missing:
            raise ValueError(f"var_names: {missing} are not in the coreset ({names_all})")
    points = source[names]
    if "point" in points.dims:
        points = points.transpose("point", ...)
    return points, w


def weighted_mean(idata, var_names=None, group: str = "posterior"):
    """The coreset's weighted mean of each variable of a
    :func:`~stein_coreset.integrations.pymc.compress_trace` result: the sum over the support of
    ``coreset.weight * coreset[v]``.

    This is the estimate to use for every kind of weights: for equal-weighted results it is
    the plain mean of the posterior draws, for simplex results (``sr``, ``lsr``, ``rt``) it is
    exact where the posterior's resampled draws are within resampling error of it, and for
    signed results (``sc``, ``lsc``, ``ct``), which have no posterior draws, it is the only
    mean there is.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        A ``compress_trace`` result.
    var_names : str or list of str, optional
        Variables to average (default: every variable stored with the support).
    group : str
        As in :func:`coreset_support` (results written before the ``point`` dimension only).

    Returns
    -------
    xarray.Dataset
        One variable per name, without the ``point`` dimension.

    Notes
    -----
    O(m d).

    See Also
    --------
    coreset_support : the weighted points themselves.
    summary : adds sd and an interval.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.arviz import weighted_mean
    >>> cs = xr.Dataset({"weight": ("point", [1.5, -0.5]), "mu": ("point", [1.0, 2.0])})
    >>> float(weighted_mean(xr.DataTree.from_dict({"coreset": cs}))["mu"])
    0.5
    """
    points, w = coreset_support(idata, var_names, group)
    return (points * w).sum("point")


def summary(idata, var_names=None, *, prob: float = 0.94):
    """What ``az.summary`` would say of a coreset if it read the weights: weighted mean, sd and
    (for non-negative weights) the equal-tailed interval, and no MCMC diagnostics.

    A coreset is not a Markov chain: ESS, MCSE and R-hat of its points mean nothing, so there
    are no such columns. The figures come from the weighted support (the ``coreset`` group),
    so they are exact for every kind of weights, including signed ones and simplex ones whose
    posterior group holds a resample.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        A :func:`~stein_coreset.integrations.pymc.compress_trace` result.
    var_names : str or list of str, optional
        Variables to summarise (default: all).
    prob : float
        Mass of the equal-tailed interval (default 0.94, ArviZ 0.x's HDI default).

    Returns
    -------
    pandas.DataFrame
        One row per scalar entry, labelled as ``az.summary`` labels them (``theta[A]``);
        columns ``mean``, ``sd`` (``sqrt(sum_i w_i (x_i - mean)^2)``, the weighted population
        sd: for equal weights ``sqrt((m - 1) / m)`` times the ``ddof=1`` sd ``az.summary``
        prints), and for non-negative weights ``eti_lo%`` / ``eti_hi%``, the weighted
        quantiles (lowest point whose cumulative weight reaches the level). Signed weights
        have no quantiles (their cumulative weight need not be monotone), and ``sd`` is NaN
        where their weighted variance is negative. ``df.attrs`` names the method and kind.

    Notes
    -----
    O(m log m) per entry (a sort for the quantiles).

    See Also
    --------
    weighted_mean : the means as an ``xarray.Dataset``.
    coreset_support : the weighted points the figures come from.
    stein_coreset.integrations.pymc.compress_trace : the results this reads.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.arviz import summary
    >>> cs = xr.Dataset({"weight": ("point", [0.25, 0.75]), "mu": ("point", [0.0, 4.0])})
    >>> summary(xr.DataTree.from_dict({"coreset": cs}))[["mean", "sd"]].round(3)
        mean     sd
    mu   3.0  1.732
    """
    import pandas as pd


    prob = val.check_real(prob, "prob", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    points, w = coreset_support(idata, var_names)
    wv = np.asarray(w.values, dtype=np.float64)
    signed = bool((wv < 0).any())
    lo_q, hi_q = (1.0 - prob) / 2.0, (1.0 + prob) / 2.0
    lo_name, hi_name = f"eti_{_pct(lo_q)}%", f"eti_{_pct(hi_q)}%"
    rows, labels = [], []
    for name in points.data_vars:
        da = points[name]
        dims = [d for d in da.dims if d != "point"]
        vals = np.asarray(da.transpose("point", *dims).values, dtype=np.float64)
        vals = vals.reshape(vals.shape[0], -1)
        coords = [
            np.asarray(da.coords[d].values) if d in da.coords else np.arange(da.sizes[d])
            for d in dims
        ]
        for j, idx in enumerate(np.ndindex(*[da.sizes[d] for d in dims])):
            label = name if not dims else (
                f"{name}[{', '.join(str(c[i]) for c, i in zip(coords, idx, strict=True))}]"
            )
            x = vals[:, j]
            mean = float(wv @ x)
            var = float(wv @ (x - mean) ** 2)
            row = {"mean": mean, "sd": math.sqrt(var) if var >= 0 else math.nan}
            if not signed:
                row[lo_name] = _weighted_quantile(x, wv, lo_q)
                row[hi_name] = _weighted_quantile(x, wv, hi_q)
            rows.append(row)
            labels.append(label)
    df = pd.DataFrame(rows, index=labels)
    attrs = get_group(idata, "coreset").attrs
    df.attrs.update(
        {k: attrs[k] for k in ("stein_coreset_method", "coreset_kind") if k in attrs}
    )
    return df


def _pct(q: float) -> str:
    text = f"{100 * q:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _weighted_quantile(x, w, q: float) -> float:
    """The lowest x whose cumulative (non-negative) weight reaches q."""
    order = np.argsort(x, kind="stable")
    cw = np.cumsum(w[order])
    i = int(np.searchsorted(cw, q * cw[-1] - 1e-12, side="left"))
    return float(x[order][min(i, x.size - 1)])

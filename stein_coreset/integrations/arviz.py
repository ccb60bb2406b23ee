"""The (n, d) view of an ArviZ posterior and back.

``flatten`` turns the ``(chain, draw, *shape)`` variables of one group of an ArviZ
``InferenceData`` (or an xarray ``DataTree`` / ``Dataset``) into one ``(chain * draw, d)`` array,
chain-major (all draws of chain 0, then chain 1, ...), which is the input
:func:`stein_coreset.compress` takes; ``unflatten`` maps rows back to named variables with their
shapes, dims and coords. ArviZ and xarray are imported lazily.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _validation as val

__all__ = [
    "Layout", "flatten", "unflatten", "get_group", "has_group", "to_idata", "weighted_mean",
    "coreset_support", "summary", "arviz_major",
]


@dataclass(frozen=True)
class Layout:
    """Where each variable lives in the columns of a flattened posterior.

    :func:`flatten` returns one beside the ``(n, d)`` array; :func:`unflatten` reads it to give
    rows (the whole posterior or a coreset's points) their names, shapes, dims and coords
    back. Frozen: a layout describes one flattening and is not edited.

    Attributes
    ----------
    names : tuple of str
        Variable names, in column order.
    shapes : tuple of tuple of int
        Per variable, its shape without (chain, draw); ``()`` for a scalar.
    dims : tuple of tuple of str
        Per variable, its dim names without (chain, draw).
    slices : tuple of slice
        Per variable, its columns in X.
    coords : dict
        Coordinates of the non-(chain, draw) dims, to rebuild the variables.
    n_chains, n_draws : int
        The source grid; row ``i`` of X is chain ``i // n_draws``, draw ``i % n_draws``
        (:meth:`source`).
    chain_coords, draw_coords : array or None
        The source's chain and draw labels.
    dtypes : tuple of numpy.dtype
        Per variable, its dtype (integers are rounded back by :func:`unflatten`).

    See Also
    --------
    flatten : builds the layout.
    unflatten : uses it to map rows back to variables.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.arviz import flatten
    >>> post = xr.Dataset({"mu": (("chain", "draw"), np.zeros((2, 3))),
    ...                    "theta": (("chain", "draw", "school"), np.ones((2, 3, 2)))})
    >>> X, layout = flatten(post)
    >>> layout.names, layout.shapes, layout.dims, layout.d
    (('mu', 'theta'), ((), (2,)), ((), ('school',)), 3)
    >>> layout.slices[1]                       # theta's columns of X
    slice(1, 3, None)
    >>> layout.source([0, 4])                  # rows 0 and 4: (chains, draws)
    (array([0, 1]), array([0, 1]))
    """

    names: tuple
    shapes: tuple
    dims: tuple
    slices: tuple
    coords: dict = field(default_factory=dict)
    n_chains: int = 0
    n_draws: int = 0
    chain_coords: Any = None
    draw_coords: Any = None
    dtypes: tuple = ()

    @property
    def d(self) -> int:
        """Number of columns of X."""
        return self.slices[-1].stop if self.slices else 0

    def source(self, rows) -> tuple[np.ndarray, np.ndarray]:
        """(chain, draw) positions of the given rows of X."""
        rows = np.asarray(rows, dtype=np.int64)
        return rows // self.n_draws, rows % self.n_draws


def has_group(idata, group: str) -> bool:
    """Whether ``idata`` has the group ``group``.

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.DataTree or xarray.Dataset
        The container; a bare ``Dataset`` is taken as a posterior and has only that group.
    group : str
        The group's name (``"posterior"``, ``"warmup_posterior"``, ``"coreset"``, ...).

    Returns
    -------
    bool

    See Also
    --------
    get_group : the group's ``Dataset``, or an error naming what is missing.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.arviz import has_group
    >>> post = xr.Dataset({"mu": (("chain", "draw"), np.zeros((2, 3)))})
    >>> tree = xr.DataTree.from_dict({"posterior": post})
    >>> has_group(tree, "posterior"), has_group(tree, "warmup_posterior")
    (True, False)
    >>> has_group(post, "posterior")           # a Dataset is a posterior
    True
    """
    if _is_dataset(idata):
        return group == "posterior"
    groups = getattr(idata, "groups", None)
    if callable(groups):  # InferenceData.groups()
        return group in groups()
    children = getattr(idata, "children", None)  # DataTree
    if children is not None:
        return group in children
    return False


def get_group(idata, group: str):
    """The ``xarray.Dataset`` of a group of ``idata``.

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.DataTree or xarray.Dataset
        The container; a bare ``Dataset`` is returned as the ``"posterior"`` group.
    group : str
        The group's name.

    Returns
    -------
    xarray.Dataset
        The group (a DataTree node is converted with ``to_dataset()``).

    Raises
    ------
    ValueError
        When the group is absent, naming it (and for a missing posterior asking whether
        ``idata`` is a ``pm.sample`` result).

    See Also
    --------
    has_group : the same test without the error.
    flatten : the group as an ``(n, d)`` array.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.arviz import get_group
    >>> post = xr.Dataset({"mu": (("chain", "draw"), np.zeros((2, 3)))})
    >>> tree = xr.DataTree.from_dict({"posterior": post})
    >>> dict(get_group(tree, "posterior").sizes)
    {'chain': 2, 'draw': 3}
    >>> get_group(tree, "coreset")
    Traceback (most recent call last):
    ...
    ValueError: idata has no 'coreset' group
    """
    if _is_dataset(idata):
        if group != "posterior":
            raise ValueError(f"group: a Dataset is taken as the posterior; got group={group!r}")
        return idata
    if not has_group(idata, group):
        raise ValueError(
            f"idata has no {group!r} group"
            + (
                " (is it the output of pm.sample / an ArviZ InferenceData?)"
                if group == "posterior"
                else ""
            )
        )
    node = idata[group] if not callable(getattr(idata, "groups", None)) else getattr(idata, group)
    return node.to_dataset() if hasattr(node, "to_dataset") and not _is_dataset(node) else node


def arviz_major() -> int | None:
    """The installed ArviZ's major version, or None without ArviZ.

    0 means results are ``arviz.InferenceData``; 1 and later, ``xarray.DataTree`` (ArviZ 1.x
    has no working InferenceData, though it still answers ``hasattr(az, "InferenceData")``
    with a stub, so the version is the test to use).

    Returns
    -------
    int or None

    See Also
    --------
    to_idata : builds the container this version reads.

    Examples
    --------
    >>> from stein_coreset.integrations.arviz import arviz_major
    >>> arviz_major() in (None, 0, 1)   # None: no ArviZ; 0: InferenceData; 1: DataTree
    True
    """
    try:
        import arviz as az
    except ImportError:
        return None
    return int(str(az.__version__).split(".")[0])


def to_idata(groups: dict, like=None):
    """The container ArviZ reads for the given groups.

    An ``arviz.InferenceData`` with ArviZ 0.x, unless ``like`` is a DataTree; an
    ``xarray.DataTree`` with ArviZ >= 1 (which has no InferenceData) or without ArviZ. Groups
    outside ArviZ 0.x's schema (``coreset``) are kept without its warning.

    Parameters
    ----------
    groups : dict of str to xarray.Dataset
        The groups, by name.
    like : optional
        The input the result answers (e.g. the trace): a DataTree there gives a DataTree
        back, whatever the ArviZ version.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree

    See Also
    --------
    arviz_major : the version that decides the container.
    get_group, has_group : read a group back from either container.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.arviz import get_group, has_group, to_idata
    >>> cs = xr.Dataset({"weight": ("point", [0.5, 0.5]), "mu": ("point", [0.0, 2.0])})
    >>> idata = to_idata({"coreset": cs})
    >>> has_group(idata, "coreset"), float(get_group(idata, "coreset")["mu"].sum())
    (True, 2.0)
    >>> type(to_idata({"coreset": cs}, like=xr.DataTree())).__name__
    'DataTree'
    """
    import warnings

    import xarray as xr

    if isinstance(like, xr.DataTree) or arviz_major() != 0:
        return xr.DataTree.from_dict(dict(groups))
    import arviz as az

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*InferenceData scheme.*")
        return az.InferenceData(**groups)


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


def _is_dataset(obj) -> bool:
    try:
        import xarray as xr
    except ImportError:  # pragma: no cover - arviz needs xarray
        return False
    return isinstance(obj, xr.Dataset)


def flatten(idata, var_names=None, group: str = "posterior"):
    """Flatten a posterior group to an ``(n, d)`` float64 array.

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.DataTree or xarray.Dataset
        The draws, with dims ``(chain, draw, *shape)``.
    var_names : list of str, optional
        Variables to take, in this column order; default: every variable of the group in the
        group's order.
    group : str
        The group (default ``"posterior"``; ``"warmup_posterior"`` for the burn-in).

    Returns
    -------
    X : (chain * draw, d) float64 array
        Chain-major: all draws of chain 0, then chain 1, ...; a variable of shape ``(2, 3)``
        fills 6 columns in C order.
    layout : Layout
        Where each variable's columns are, for :func:`unflatten`.

    Notes
    -----
    O(n d) copy; no dependence on the installed ArviZ beyond its xarray groups.

    See Also
    --------
    unflatten : the inverse map.
    stein_coreset.compress : what takes X (with its scores).
    stein_coreset.integrations.pymc.compress_trace : does all of this for a PyMC trace.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.arviz import flatten
    >>> rng = np.random.default_rng(0)
    >>> post = xr.Dataset({"mu": (("chain", "draw"), rng.standard_normal((2, 3))),
    ...                    "theta": (("chain", "draw", "school"), rng.standard_normal((2, 3, 2)))})
    >>> X, layout = flatten(post)
    >>> X.shape, X.dtype
    ((6, 3), dtype('float64'))
    >>> X[:2].round(3)                         # chain 0, draws 0 and 1: mu, theta[0], theta[1]
    array([[ 0.126,  1.304,  0.947],
           [-0.132, -0.704, -1.265]])
    >>> flatten(post, var_names="theta")[0].shape
    (6, 2)
    """
    ds = get_group(idata, group)
    if var_names is None:
        var_names = list(ds.data_vars)
    elif isinstance(var_names, str):
        var_names = [var_names]
    missing = [v for v in var_names if v not in ds.data_vars]
    if missing:
        raise ValueError(f"var_names: {missing} not in the {group!r} group ({list(ds.data_vars)})")
    if not var_names:
        raise ValueError(f"the {group!r} group has no variables to flatten")
    n_chains = int(ds.sizes.get("chain", 0))
    n_draws = int(ds.sizes.get("draw", 0))
    cols, shapes, dims, slices, dtypes, coords = [], [], [], [], [], {}
    start = 0
    for name in var_names:
        da = ds[name]
        if da.dims[:2] != ("chain", "draw"):
            if "chain" in da.dims and "draw" in da.dims:
                da = da.transpose("chain", "draw", ...)
            else:
                raise ValueError(f"variable {name!r} has dims {da.dims}, not (chain, draw, ...)")
        shape = tuple(int(s) for s in da.shape[2:])
        size = int(np.prod(shape, dtype=np.int64))
        cols.append(np.asarray(da.values, dtype=np.float64).reshape(n_chains * n_draws, size))
        shapes.append(shape)
        dims.append(tuple(da.dims[2:]))
        slices.append(slice(start, start + size))
        dtypes.append(da.dtype)
        for dim in da.dims[2:]:
            if dim in ds.coords and dim not in coords:
                coords[dim] = ds.coords[dim].values
        start += size
    X = np.concatenate(cols, axis=1) if cols else np.empty((n_chains * n_draws, 0))
    layout = Layout(
        names=tuple(var_names),
        shapes=tuple(shapes),
        dims=tuple(dims),
        slices=tuple(slices),
        coords=coords,
        n_chains=n_chains,
        n_draws=n_draws,
        chain_coords=ds.coords["chain"].values if "chain" in ds.coords else None,
        draw_coords=ds.coords["draw"].values if "draw" in ds.coords else None,
        dtypes=tuple(dtypes),
    )
    return X, layout


def unflatten(X, layout: Layout, *, as_dataset: bool = True):
    """Map the rows of ``X`` back to named variables.

    Parameters
    ----------
    X : (n, d) array
        Rows in the column layout of :func:`flatten` (a whole posterior, or a coreset's points).
    layout : Layout
        From :func:`flatten`.
    as_dataset : bool
        Return an ``xarray.Dataset`` (default) with dims ``(chain, draw, *dims)``; ``False``
        returns a dict of NumPy arrays of shape ``(n, *shape)``.

    Returns
    -------
    xarray.Dataset or dict
        When ``n == n_chains * n_draws`` the source grid (chain and draw coords included);
        otherwise one chain of ``n`` draws. Variables keep their dtypes (rounded for
        integers).

    Notes
    -----
    O(n d).

    See Also
    --------
    flatten : the forward map, which gives the layout.
    coreset_support : a ``compress_trace`` result's points, already named.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from stein_coreset.integrations.arviz import flatten, unflatten
    >>> rng = np.random.default_rng(0)
    >>> post = xr.Dataset({"mu": (("chain", "draw"), rng.standard_normal((2, 3))),
    ...                    "theta": (("chain", "draw", "school"), rng.standard_normal((2, 3, 2)))},
    ...                   coords={"school": ["A", "B"]})
    >>> X, layout = flatten(post)
    >>> np.array_equal(unflatten(X, layout)["theta"], post["theta"])   # the whole grid back
    True
    >>> points = unflatten(X[[4, 1]], layout)    # two rows: one chain of 2 draws
    >>> dict(points.sizes), points["theta"].dims
    ({'chain': 1, 'draw': 2, 'school': 2}, ('chain', 'draw', 'school'))
    >>> {k: v.shape for k, v in unflatten(X[[4, 1]], layout, as_dataset=False).items()}
    {'mu': (2,), 'theta': (2, 2)}
    """
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != layout.d:
        raise ValueError(f"X must have shape (n, {layout.d}); got {X.shape}")
    n = X.shape[0]
    out = {}
    for name, shape, sl, dt in zip(
        layout.names, layout.shapes, layout.slices, layout.dtypes, strict=True
    ):
        v = X[:, sl].reshape((n,) + shape)
        if np.issubdtype(dt, np.integer):
            v = np.rint(v)
        out[name] = v.astype(dt, copy=False)
    if not as_dataset:
        return out
    import xarray as xr

    grid = n == layout.n_chains * layout.n_draws and layout.n_chains > 0
    nc, nd = (layout.n_chains, layout.n_draws) if grid else (1, n)
    coords = {
        "chain": layout.chain_coords if grid and layout.chain_coords is not None else np.arange(nc),
        "draw": layout.draw_coords if grid and layout.draw_coords is not None else np.arange(nd),
    }
    data_vars = {}
    for name, shape, dims in zip(layout.names, layout.shapes, layout.dims, strict=True):
        data_vars[name] = (("chain", "draw") + dims, out[name].reshape((nc, nd) + shape))
        for dim in dims:
            if dim in layout.coords:
                coords[dim] = layout.coords[dim]
    return xr.Dataset(data_vars, coords=coords)

"""The (n, d) view of an ArviZ posterior and back.

``flatten`` turns the ``(chain, draw, *shape)`` variables of one group of an ArviZ
``InferenceData`` (or an xarray ``DataTree`` / ``Dataset``) into one ``(chain * draw, d)`` array,
chain-major (all draws of chain 0, then chain 1, ...), which is the input
:func:`stein_coreset.compress` takes; ``unflatten`` maps rows back to named variables with their
shapes, dims and coords. ArviZ and xarray are imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Layout", "flatten", "unflatten", "get_group", "has_group", "to_idata", "weighted_mean",
    "arviz_major",
]


@dataclass(frozen=True)
class Layout:
    """Where each variable lives in the columns of a flattened posterior.

    Attributes
    ----------
    names : variable names, in column order.
    shapes : per variable, its shape without (chain, draw).
    dims : per variable, its dim names without (chain, draw).
    slices : per variable, its columns in X.
    coords : coordinates of the non-(chain, draw) dims, to rebuild the variables.
    n_chains, n_draws : the source grid; row ``i`` of X is chain ``i // n_draws``, draw
        ``i % n_draws``.
    chain_coords, draw_coords : the source's chain and draw labels.
    dtypes : per variable, its dtype.
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
    """Whether ``idata`` (InferenceData, DataTree or Dataset) has the group."""
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
    """The ``xarray.Dataset`` of a group; a clear ``ValueError`` when it is absent."""
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
    """The installed ArviZ's major version (0: InferenceData; >= 1: DataTree), None without
    ArviZ. (ArviZ 1.x still answers ``hasattr(az, "InferenceData")`` with a stub.)"""
    try:
        import arviz as az
    except ImportError:
        return None
    return int(str(az.__version__).split(".")[0])


def to_idata(groups: dict, like=None):
    """An ``arviz.InferenceData`` of the ``{name: Dataset}`` groups with ArviZ 0.x, unless
    ``like`` is a DataTree; an ``xarray.DataTree`` with ArviZ >= 1 (which has no
    InferenceData). Groups outside ArviZ 0.x's schema (``coreset``) are kept without its
    warning."""
    import warnings

    import xarray as xr

    if isinstance(like, xr.DataTree) or arviz_major() != 0:
        return xr.DataTree.from_dict(dict(groups))
    import arviz as az

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*InferenceData scheme.*")
        return az.InferenceData(**groups)


def weighted_mean(idata, var_names=None, group: str = "posterior"):
    """The coreset's weighted mean of each variable of a :func:`compress_trace` result: the
    sum over (chain, draw) of ``coreset.weight * posterior[v]`` (an ``xarray.Dataset``).

    For equal-weighted results it is the plain mean ``az.summary`` reports; for simplex and
    signed (``sc``, ``lsc``) weights it is the estimate to use, which ``az.summary`` (blind to
    weights) does not give. O(m d).
    """
    ds = get_group(idata, group)
    w = get_group(idata, "coreset")["weight"]
    names = list(ds.data_vars) if var_names is None else (
        [var_names] if isinstance(var_names, str) else list(var_names)
    )
    return (ds[names] * w).sum(("chain", "draw"))


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
    X : (chain * draw, d) float64 array, chain-major.
    layout : :class:`Layout` for :func:`unflatten`.

    Notes
    -----
    O(n d) copy; no dependence on the installed ArviZ beyond its xarray groups.
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
    When ``n == n_chains * n_draws`` the source grid (chain and draw coords included);
    otherwise one chain of ``n`` draws. Variables keep their dtypes (rounded for integers).
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

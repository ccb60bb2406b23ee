"""The (n, d) view of an ArviZ posterior and back, and the ArviZ side of every integration.

``flatten`` turns the ``(chain, draw, *shape)`` variables of one group of an ArviZ
``InferenceData`` (or an xarray ``DataTree`` / ``Dataset``) into one ``(chain * draw, d)`` array,
chain-major (all draws of chain 0, then chain 1, ...), which is the input
:func:`stein_coreset.compress` takes; ``unflatten`` maps rows back to named variables with their
shapes, dims and coords. This module also gives, under one name, the group access of
:mod:`.containers` (``get_group``, ``has_group``, ``to_idata``, ``arviz_major``) and the weighted
figures of a result of :mod:`.summaries` (``summary``, ``weighted_mean``, ``coreset_support``).
ArviZ and xarray are imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .containers import arviz_major, get_group, has_group, to_idata
from .summaries import coreset_support, summary, weighted_mean

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

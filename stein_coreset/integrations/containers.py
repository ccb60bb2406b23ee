"""The groups of an ArviZ container, whichever ArviZ is installed.

ArviZ 0.x gives ``arviz.InferenceData``; ArviZ >= 1 (and xarray alone) ``xarray.DataTree``. Every
integration reads and writes groups through :func:`get_group`, :func:`has_group` and
:func:`to_idata`, which take either container, a bare ``xarray.Dataset`` (a posterior) or a dict of
groups. Re-exported by :mod:`stein_coreset.integrations.arviz`. xarray and ArviZ are imported
lazily.
"""

from __future__ import annotations

__all__ = ["get_group", "has_group", "to_idata", "arviz_major"]


def has_group(idata, group: str) -> bool:
    """Whether ``idata`` has the group ``group``.

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.DataTree, xarray.Dataset or dict
        The container; a bare ``Dataset`` is taken as a posterior and has only that group; a
        dict maps group names to ``Dataset`` objects.
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
    if isinstance(idata, dict):
        return group in idata
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
    idata : arviz.InferenceData, xarray.DataTree, xarray.Dataset or dict
        The container; a bare ``Dataset`` is returned as the ``"posterior"`` group; a dict maps
        group names to ``Dataset`` objects.
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
    if isinstance(idata, dict):
        return idata[group]
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


def _is_dataset(obj) -> bool:
    try:
        import xarray as xr
    except ImportError:  # pragma: no cover - arviz needs xarray
        return False
    return isinstance(obj, xr.Dataset)

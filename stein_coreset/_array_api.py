"""Array-namespace lookup and explicit host transfers.

Every public function calls :func:`namespace` on its array arguments, works through the
returned ``xp`` (an array-API namespace from ``array_api_compat``) and hands results back in
that namespace and on the caller's device. Crossing into the C++ core is explicit and counted:
:func:`to_host` / :func:`from_host`.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import array_api_compat
import numpy as np

__all__ = [
    "as_arrays",
    "namespace",
    "device_of",
    "to_host",
    "from_host",
    "copy_array",
    "is_numpy",
    "is_cupy",
    "as_index_array",
    "TRANSFERS",
]

#: Host transfers made by :func:`to_host` / :func:`from_host`: counts ("to_host", "from_host")
#: and bytes ("to_host_bytes", "from_host_bytes"). NumPy inputs cross for free and are not
#: counted. Tests use it to check that no transfer happens inside a per-point loop.
TRANSFERS: Counter = Counter()


def namespace(**arrays: Any):
    """Return ``(xp, device)`` shared by the named arrays (``None`` values are skipped).

    Raises
    ------
    TypeError
        If the arrays come from different array libraries or live on different devices; the
        message names the arguments.
    """
    named = {k: v for k, v in arrays.items() if v is not None}
    if not named:
        raise TypeError("no array given")
    if all(type(v) is np.ndarray for v in named.values()):  # the common case, without the
        return _NUMPY                                        # lookups (~20 us a call)
    for name, a in named.items():
        if isinstance(a, np.ma.MaskedArray):  # the array API would silently drop its mask
            raise ValueError(
                f"{name} is a masked array; its mask would be ignored: drop the masked rows "
                f"(or, in compress, pass nan_policy='omit', which drops them)"
            )
        if not array_api_compat.is_array_api_obj(a):
            raise TypeError(
                f"{name} must be an array (NumPy, CuPy or another array-API library), "
                f"got {type(a).__name__}"
            )
    try:
        xp = array_api_compat.array_namespace(*named.values())
    except TypeError as e:
        kinds = ", ".join(f"{k}: {type(v).__module__}.{type(v).__name__}" for k, v in named.items())
        raise TypeError(f"arrays from different array libraries were mixed ({kinds})") from e
    devices = {k: array_api_compat.device(v) for k, v in named.items()}
    first_name, first = next(iter(devices.items()))
    for k, dv in devices.items():
        if dv != first:
            raise TypeError(
                f"{k} is on device {dv!r} but {first_name} is on device {first!r}; "
                "move them to one device first"
            )
    return xp, first


_NUMPY = (array_api_compat.array_namespace(np.empty(0)), array_api_compat.device(np.empty(0)))


def _as_array(x, name: str):
    """One user argument as an array: array-API objects (NumPy, CuPy, torch, JAX, ...) as they
    are (a device array is never copied to the host); host array-likes converted once."""
    if isinstance(x, np.ma.MaskedArray):
        n_masked = int(np.ma.count_masked(x))
        if n_masked:
            raise ValueError(
                f"{name} is a masked array with {n_masked} masked entries; a mask is never "
                f"ignored: drop those rows ({name} = np.ma.compress_rows({name})) or mark them "
                f"missing ({name}.filled(np.nan)) and pass nan_policy='omit'"
            )
        return np.asarray(x.data)
    mod = type(x).__module__.split(".")[0]
    if mod == "dask" or array_api_compat.is_dask_array(x):
        raise TypeError(
            f"{name} is a dask {type(x).__name__}; this function holds its input in memory. "
            "Compress a dask array block by block with stein_coreset.distributed.compress, or "
            f"pass {name}.compute() if it fits in memory"
        )
    if array_api_compat.is_array_api_obj(x):
        return x
    if mod == "pandas" and hasattr(x, "to_numpy"):  # DataFrame, Series: NA -> NaN
        _refuse_pandas_non_numeric(x, name)
        try:
            return x.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"{name}: a pandas {type(x).__name__} with non-numeric values ({e}); select "
                "the numeric columns"
            ) from None
    if mod == "xarray":
        if hasattr(x, "data_vars"):
            raise TypeError(
                f"{name} is an xarray Dataset; pass one DataArray of shape (n, d), or flatten "
                "a posterior with stein_coreset.integrations.arviz.flatten"
            )
        data = getattr(x, "data", None)
        if data is not None and array_api_compat.is_array_api_obj(data):
            return data  # NumPy or a device array, as it is
        return _as_array(np.asarray(x), name)
    if isinstance(x, (list, tuple)) or hasattr(x, "__array__"):
        try:
            arr = np.asarray(x)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name} could not be read as an array: {e}") from None
        if arr.dtype.kind not in "biuf":
            raise TypeError(
                f"{name} must hold real numbers; as an array it has dtype {arr.dtype}"
            )
        return arr
    raise TypeError(
        f"{name} must be an array (NumPy, CuPy or another array-API library) or a host "
        f"array-like (list, pandas, xarray), got {type(x).__name__}"
    )


def _refuse_pandas_non_numeric(x, name: str) -> None:
    """A DataFrame / Series column of datetimes, timedeltas, periods or categories is refused
    (``to_numpy(float64)`` reads a datetime as nanoseconds and a numeric category as its value,
    silently: a KSD of 1.3e10 on a time column)."""
    import pandas as pd

    dtypes = x.dtypes.items() if hasattr(x, "dtypes") and hasattr(x, "columns") else [
        (getattr(x, "name", None), x.dtype)]
    for col, dt in dtypes:
        if isinstance(dt, pd.CategoricalDtype):
            kind = "categorical"
        elif pd.api.types.is_datetime64_any_dtype(dt):
            kind = "datetime"
        elif pd.api.types.is_timedelta64_dtype(dt):
            kind = "timedelta"
        elif isinstance(dt, pd.PeriodDtype):
            kind = "period"
        else:
            continue
        where = f"column {col!r}" if hasattr(x, "columns") else (
            f"the Series {col!r}" if col is not None else "the Series")
        read_as = {"categorical": "its codes or category values",
                   "period": "its ordinals"}.get(kind, "nanoseconds")
        raise TypeError(
            f"{name}: {where} has {kind} dtype {dt}, which would be read as numbers "
            f"({read_as}) without a unit or meaning; drop it or convert it to real numbers "
            "yourself"
        )


def as_arrays(**arrays: Any) -> tuple:
    """The named user arguments as arrays, in order (``None`` stays ``None``): array-API arrays
    unchanged; lists, tuples, pandas DataFrames / Series (NA -> NaN), xarray DataArrays and
    objects with ``__array__`` converted to NumPy once; a masked array with masked entries is
    refused (its mask is never silently dropped). Called once at the public boundary."""
    return tuple(None if v is None else _as_array(v, k) for k, v in arrays.items())


def device_of(x):
    return array_api_compat.device(x)


def is_numpy(xp) -> bool:
    return array_api_compat.is_numpy_namespace(xp)


def is_cupy(xp) -> bool:
    return array_api_compat.is_cupy_namespace(xp)


def device_memory(x) -> tuple[int, int, int] | None:
    """(bytes available, bytes in all, device id) of the CUDA device holding the CuPy array
    ``x`` — the driver's free bytes plus what CuPy's pool holds unused — or None for an array
    that is not on a CUDA device."""
    if not array_api_compat.is_cupy_array(x):
        return None
    import cupy

    dev_id = int(x.device.id)
    with cupy.cuda.Device(dev_id):
        free, total = cupy.cuda.runtime.memGetInfo()
        return int(free + cupy.get_default_memory_pool().free_bytes()), int(total), dev_id


def to_host(x, dtype=np.float64) -> np.ndarray:
    """Copy an array of any namespace into a C-contiguous NumPy array (one explicit transfer)."""
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x, dtype=dtype)
    TRANSFERS["to_host"] += 1
    if array_api_compat.is_cupy_array(x):
        out = np.ascontiguousarray(x.get(), dtype=dtype)
    else:
        if array_api_compat.is_array_api_strict_namespace(array_api_compat.array_namespace(x)):
            import array_api_strict

            x = x.to_device(array_api_strict.Device("CPU_DEVICE"))
        out = np.ascontiguousarray(np.from_dlpack(x), dtype=dtype)
    TRANSFERS["to_host_bytes"] += out.nbytes
    return out


def copy_array(x):
    """A copy of an array of any namespace, on its device (a list or tuple: a deep copy), so
    that later in-place changes of ``x`` do not reach it."""
    if isinstance(x, np.ndarray):
        return x.copy()
    if array_api_compat.is_array_api_obj(x):
        xp = array_api_compat.array_namespace(x)
        return xp.asarray(x, copy=True)
    import copy

    return copy.deepcopy(x)


def from_host(y: np.ndarray, like=None, *, xp=None, device=None):
    """Move a host NumPy array into the namespace and device of ``like`` (or ``xp``/``device``)."""
    if like is not None:
        xp = array_api_compat.array_namespace(like)
        device = array_api_compat.device(like)
    if is_numpy(xp):
        return y
    TRANSFERS["from_host"] += 1
    TRANSFERS["from_host_bytes"] += np.asarray(y).nbytes
    return xp.asarray(y, device=device)


def host_indices(idx) -> np.ndarray:
    """An int64 NumPy array from a host sequence or an index array of any namespace."""
    if isinstance(idx, (np.ndarray, list, tuple, range)):
        return np.ascontiguousarray(idx, dtype=np.int64)
    return to_host(idx, np.int64)


def c_order(A):
    """A NumPy array as a C-contiguous one (a reduction along its last axis then runs along
    memory, in the same order whatever the caller's layout); other arrays as they are (their
    library decides)."""
    return np.ascontiguousarray(A) if isinstance(A, np.ndarray) else A


@functools.lru_cache(maxsize=32)
def spaced_rows(n: int, k: int) -> np.ndarray:
    """``k`` evenly spaced rows of ``n`` (the middle of each of k equal stretches), a read-only
    int64 host array: the rows the bounded checks read, every stage of a chain in proportion."""
    rows = np.floor((np.arange(k) + 0.5) * (n / k)).astype(np.int64)
    rows.setflags(write=False)
    return rows


def take_rows(xp, A, idx):
    """``xp.take(A, idx, axis=0)``; a column-major NumPy array (a DataFrame's values, the
    transpose of a solve) is gathered column by column, 4-25x faster than NumPy's row-wise
    gather of it for 2048 of 2^15 rows at d = 2..50 (that gather jumps a column's length per
    element)."""
    if isinstance(A, np.ndarray) and A.ndim == 2 and A.flags.f_contiguous and \
            not A.flags.c_contiguous:
        return np.take(A.T, idx, axis=1).T
    return xp.take(A, idx, axis=0)


def as_index_array(xp, idx, device):
    """An int64 index array in namespace ``xp`` from a host sequence or array."""
    if isinstance(idx, np.ndarray) or isinstance(idx, (list, tuple, range)):
        return from_host(np.asarray(idx, dtype=np.int64), xp=xp, device=device)
    return xp.astype(idx, xp.int64)

"""Array-namespace lookup, explicit host transfers and input validation.

Every public function calls :func:`namespace` on its array arguments, works through the
returned ``xp`` (an array-API namespace from ``array_api_compat``) and hands results back in
that namespace and on the caller's device. Crossing into the C++ core is explicit and counted:
:func:`to_host` / :func:`from_host`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import array_api_compat
import numpy as np

__all__ = [
    "namespace",
    "device_of",
    "to_host",
    "from_host",
    "is_numpy",
    "check_points",
    "check_scores",
    "check_weights",
    "check_size",
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
    for name, a in named.items():
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


def device_of(x):
    return array_api_compat.device(x)


def is_numpy(xp) -> bool:
    return array_api_compat.is_numpy_namespace(xp)


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


def _float_dtype(xp, a, name):
    if xp.isdtype(a.dtype, "real floating"):
        return a if a.dtype == xp.float64 else xp.astype(a, xp.float64)
    if xp.isdtype(a.dtype, "integral") or a.dtype == xp.bool:
        return xp.astype(a, xp.float64)
    raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")


def nonfinite_rows(xp, A):
    """Boolean mask (n,) of rows of a 2-D array with a NaN or inf entry."""
    return xp.any(~xp.isfinite(A), axis=1)


def check_points(X, xp, name: str = "X", *, allow_nonfinite: bool = False):
    """Validate a (n, d) float array; raise naming ``name`` on shape, dtype or NaN/inf trouble."""
    if X.ndim != 2:
        hint = " (use X.reshape(-1, 1) for one-dimensional points)" if X.ndim == 1 else ""
        raise ValueError(f"{name} must be a 2-D array of shape (n, d), got shape {X.shape}{hint}")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name} must have at least one row and one column, got shape {X.shape}")
    X = _float_dtype(xp, X, name)
    if not allow_nonfinite:
        bad = int(xp.sum(xp.astype(nonfinite_rows(xp, X), xp.int64)))
        if bad:
            raise ValueError(
                f"{name} has NaN or inf in {bad} of its {X.shape[0]} rows"
                + ("; pass nan_policy='omit' to drop them" if name in ("X", "S") else "")
            )
    return X


def check_scores(S, X, xp, name: str = "S", *, allow_nonfinite: bool = False):
    """Validate scores ``S`` (the gradient of log p at the rows of ``X``)."""
    if S is None:
        raise ValueError(f"{name} (the scores grad log p at the points) is required")
    if tuple(S.shape) != tuple(X.shape):
        raise ValueError(
            f"{name} must have the same shape as the points, {tuple(X.shape)}; got {tuple(S.shape)}"
        )
    return check_points(S, xp, name, allow_nonfinite=allow_nonfinite)


def check_weights(w, n: int, xp, name: str = "weights", *, simplex: bool = False, device=None):
    """Validate a weight vector of length ``n`` (finite; on the simplex when ``simplex``).

    ``None`` becomes uniform weights on ``device``.
    """
    if w is None:
        return xp.full((n,), 1.0 / n, dtype=xp.float64, device=device)
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},), got {tuple(w.shape)}")
    w = _float_dtype(xp, w, name)
    if not bool(xp.all(xp.isfinite(w))):
        raise ValueError(f"{name} has NaN or inf entries")
    if simplex:
        if bool(xp.any(w < 0)):
            raise ValueError(f"{name} must be non-negative")
        total = float(xp.sum(w))
        if not math.isclose(total, 1.0, rel_tol=1e-6):
            raise ValueError(f"{name} must sum to 1, got sum {total:.6g}")
    return w


def check_size(size, n: int, name: str = "size") -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(size).__name__}")
    size = int(size)
    if size < 1 or size > n:
        raise ValueError(f"{name} must be between 1 and n = {n}, got {size}")
    return size


def host_indices(idx) -> np.ndarray:
    """An int64 NumPy array from a host sequence or an index array of any namespace."""
    if isinstance(idx, (np.ndarray, list, tuple, range)):
        return np.ascontiguousarray(idx, dtype=np.int64)
    return to_host(idx, np.int64)


def as_index_array(xp, idx, device):
    """An int64 index array in namespace ``xp`` from a host sequence or array."""
    if isinstance(idx, np.ndarray) or isinstance(idx, (list, tuple, range)):
        return from_host(np.asarray(idx, dtype=np.int64), xp=xp, device=device)
    return xp.astype(idx, xp.int64)

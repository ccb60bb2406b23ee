"""Input validation at the public boundary (scikit-learn's ``check_scalar`` /
``check_random_state`` style).

Public functions call these helpers once on what the user gave them, then hand the converted
values to internal code that trusts them. :func:`stein_coreset.compress` validates its input here
and calls the building blocks' private, trusting implementations, so one ``compress`` call checks
the points and scores once (one NaN scan, one namespace lookup).

Every error names the argument it is about.
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np

from . import _array_api as aa

__all__ = [
    "check_int",
    "check_real",
    "check_positive",
    "check_real_parameter",
    "check_bool",
    "check_choice",
    "check_random_state",
    "check_points",
    "check_scores",
    "check_weights",
    "check_size",
    "check_index_array",
    "check_matrix",
    "nonfinite_rows",
    "all_finite",
]


def check_int(value, name: str, *, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as a Python int in [lo, hi]; booleans are rejected.

    Raises ``TypeError`` (not an integer) or ``ValueError`` (out of bounds) naming ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    value = int(value)
    if lo is not None and hi is not None and not lo <= value <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value}")
    if lo is not None and value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    if hi is not None and value > hi:
        raise ValueError(f"{name} must be <= {hi}, got {value}")
    return value


def check_real(
    value,
    name: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """``value`` as a finite Python float in the interval given by lo/hi (open ends optional)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    bad = not math.isfinite(value)
    if lo is not None:
        bad = bad or (value <= lo if lo_open else value < lo)
    if hi is not None:
        bad = bad or (value >= hi if hi_open else value > hi)
    if bad:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        lo_s = "-inf" if lo is None else f"{lo:g}"
        hi_s = "inf" if hi is None else f"{hi:g}"
        raise ValueError(f"{name} must lie in {lb}{lo_s}, {hi_s}{rb}, got {value}")
    return value


def check_positive(value, name: str) -> float:
    """A finite real number > 0 as a Python float (a bandwidth, a step size)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return value


#: Bandwidths whose fourth power is a normal float: the Stein kernel divides by sigma^4.
SIGMA_RANGE = (1e-75, 1e75)


def check_bandwidth(value, name: str = "sigma") -> float:
    """A kernel bandwidth in :data:`SIGMA_RANGE` (beyond it sigma^4 under- or overflows)."""
    value = check_positive(value, name)
    lo, hi = SIGMA_RANGE
    if not lo <= value <= hi:
        raise ValueError(
            f"{name} = {value:.3g} is outside [{lo:g}, {hi:g}], where the kernel's derivatives "
            "(sigma^-4) stay finite; rescale the points (and scores) instead"
        )
    return value


def check_real_parameter(value, name: str) -> None:
    """Refuse a complex number or an array of complex (or non-numeric) entries as a real
    parameter such as the preconditioner M (``TypeError`` naming it; before,
    ``np.asarray(M, dtype=float64)`` dropped the imaginary part with a ComplexWarning only).
    Strings, None and real numbers pass; shapes and values are checked where they are used."""
    if value is None or isinstance(value, str):
        return
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a number or an array of real numbers, got bool")
    if isinstance(value, numbers.Number):
        if not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be real, got the {type(value).__name__} {value!r}")
        return
    dtype = getattr(value, "dtype", None)
    if dtype is None:  # a list or tuple
        try:
            dtype = np.asarray(value).dtype
        except (TypeError, ValueError):
            raise TypeError(f"{name} must hold real numbers") from None
    kind = getattr(np.dtype(dtype), "kind", None) if _numpy_dtype(dtype) else None
    if kind is None:  # another library's dtype: ask its namespace
        try:
            xp = aa.namespace(**{name: value})[0]
            if xp.isdtype(dtype, ("real floating", "integral")):
                return
        except (TypeError, AttributeError, ValueError):
            return  # an unknown kind of array: the use site converts and checks it
        raise TypeError(f"{name} must hold real numbers, got {dtype} entries")
    if kind == "c":
        raise TypeError(f"{name} must be real, got complex ({dtype}) entries; the imaginary "
                        "part would be dropped")
    if kind not in "fiub":
        raise TypeError(f"{name} must hold real numbers, got {dtype} entries")


def _numpy_dtype(dtype) -> bool:
    try:
        np.dtype(dtype)
    except TypeError:
        return False
    return True


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def check_buffer(nbytes: float, name: str, what: str, like=None) -> None:
    """Refuse, before allocating, a buffer larger than the memory it will live in (the estimate
    and the argument that set it in the message): the free memory of the CUDA device that holds
    ``like`` (a CuPy array), else this machine's physical memory."""
    dev = None if like is None else aa.device_memory(like)
    if dev is not None:
        avail, total, dev_id = dev
        if nbytes > avail:
            raise ValueError(
                f"{name}: {what} would need {nbytes / 2**30:.3g} GiB of device memory; "
                f"{avail / 2**30:.3g} GiB of {total / 2**30:.3g} GiB are free on CUDA device "
                f"{dev_id}"
            )
        return
    total = physical_memory()
    if total is not None and nbytes > total:
        raise ValueError(
            f"{name}: {what} would need {nbytes / 2**30:.3g} GiB, more than this machine's "
            f"{total / 2**30:.3g} GiB of memory"
        )


#: Buffers smaller than this are not checked: a memory query per small block (a CUDA call on
#: the device) would cost more than the check is worth, and they fit anywhere.
SMALL_BUFFER = 1 << 26


def check_matrix(rows: int, cols: int, name: str, what: str, *, like=None,
                 copies: float = 1) -> None:
    """Refuse, before it is formed, a dense ``rows x cols`` float64 matrix that does not fit in
    memory (:func:`check_buffer`'s message, naming ``name``): ``copies`` such arrays are alive
    at the peak of the computation that forms it. Below :data:`SMALL_BUFFER` nothing is
    queried."""
    nbytes = 8.0 * float(rows) * float(cols) * float(copies)
    if nbytes < SMALL_BUFFER:
        return
    peak = f", about {copies:g} such arrays while it is formed" if copies > 1 else ""
    check_buffer(nbytes, name, f"{what} ({rows} x {cols} float64{peak})", like=like)


def check_bool(value, name: str) -> bool:
    """A real boolean (Python or NumPy bool); strings such as ``"no"`` raise ``TypeError``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r}")


def check_choice(value, name: str, choices) -> str:
    """One of the strings ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}"
        )
    return value


def check_random_state(seed, name: str = "seed") -> np.random.Generator:
    """A ``numpy.random.Generator`` from ``None``, a non-negative int seed, a ``SeedSequence``,
    a ``BitGenerator`` or a ``Generator`` (returned as is, so its stream is shared).

    ``None`` and ints give ``numpy.random.default_rng(seed)``. Booleans, negative ints and
    anything else raise an error naming ``name``.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, (np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(seed)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            f"{name} must be None, a non-negative integer or a numpy.random.Generator, "
            f"got {type(seed).__name__}"
        )
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {seed}")
    return np.random.default_rng(int(seed))


def _float_dtype(xp, a, name):
    if xp.isdtype(a.dtype, "real floating"):
        return a if a.dtype == xp.float64 else xp.astype(a, xp.float64)
    if xp.isdtype(a.dtype, "integral") or a.dtype == xp.bool:
        return xp.astype(a, xp.float64)
    raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")


def masked_as_nan(A, name: str, nan_policy: str):
    """A NumPy masked array's masked entries as NaN under ``nan_policy="omit"`` (so that
    their rows are dropped like other non-finite rows); refused under "raise" when something
    is masked. Anything else is returned as is."""
    if not isinstance(A, np.ma.MaskedArray):
        return A
    mask = np.ma.getmaskarray(A)
    if not mask.any():
        return np.asarray(A.data)
    if nan_policy != "omit":
        rows = int(mask.reshape(mask.shape[0], -1).any(axis=1).sum()) if mask.ndim else 1
        raise ValueError(
            f"{name} is a masked array with {rows} masked rows; pass nan_policy='omit' to drop "
            "them (its mask is otherwise not seen by the computation)"
        )
    if not np.issubdtype(A.dtype, np.floating):
        A = A.astype(np.float64)
    return np.ma.filled(A, np.nan)


def nonfinite_rows(xp, A):
    """Boolean mask (n,) of rows of a 2-D array with a NaN or inf entry."""
    return xp.any(~xp.isfinite(A), axis=1)


def all_finite(xp, *arrays) -> bool:
    """Whether every entry of every array is finite: one host synchronisation, and ~20x cheaper
    than :func:`nonfinite_rows` (a whole-array reduction, not one per row), so the usual clean
    input never pays for the row mask."""
    ok = None
    for A in arrays:
        if A is not None:
            a = xp.all(xp.isfinite(A))
            ok = a if ok is None else ok & a
    return ok is None or bool(ok)


def check_points(X, xp, name: str = "X", *, allow_nonfinite: bool = False):
    """Validate a (n, d) float array; raise naming ``name`` on shape, dtype or NaN/inf trouble.

    One NaN/inf scan (one device synchronisation) unless ``allow_nonfinite``.
    """
    if X.ndim != 2:
        hint = " (use X.reshape(-1, 1) for one-dimensional points)" if X.ndim == 1 else ""
        raise ValueError(f"{name} must be a 2-D array of shape (n, d), got shape {X.shape}{hint}")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name} must have at least one row and one column, got shape {X.shape}")
    X = _float_dtype(xp, X, name)
    if not allow_nonfinite and not all_finite(xp, X):
        bad = int(xp.sum(xp.astype(nonfinite_rows(xp, X), xp.int64)))
        if bad:
            raise ValueError(
                f"{name} has NaN or inf in {bad} of its {X.shape[0]} rows; drop those rows "
                f"first ({name}[np.isfinite({name}).all(axis=1)]; compress does it with "
                "nan_policy='omit')"
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


def check_weights(
    w, n: int, xp, name: str = "weights", *, simplex: bool = False, sum_to_one: bool = False,
    device=None,
):
    """Validate a weight vector of length ``n`` (finite; on the simplex when ``simplex``;
    summing to one, signs free, when ``sum_to_one``).

    ``None`` becomes uniform weights on ``device``.
    """
    if w is None:
        return xp.full((n,), 1.0 / n, dtype=xp.float64, device=device)
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},), got {tuple(w.shape)}")
    w = _float_dtype(xp, w, name)
    if not bool(xp.all(xp.isfinite(w))):
        raise ValueError(f"{name} has NaN or inf entries")
    if simplex and bool(xp.any(w < 0)):
        raise ValueError(f"{name} must be non-negative (a probability vector)")
    if simplex or sum_to_one:
        total = float(xp.sum(w))
        if not math.isclose(total, 1.0, rel_tol=1e-6):
            raise ValueError(f"{name} must sum to 1, got sum {total:.6g}")
    return w


def check_size(size, n: int, name: str = "size") -> int:
    """An integer in [1, n] (a coreset size or a rank)."""
    if isinstance(size, bool) or not isinstance(size, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(size).__name__}")
    size = int(size)
    if size < 1 or size > n:
        raise ValueError(f"{name} must be between 1 and n = {n}, got {size}")
    return size


def check_index_array(idx, n: int, name: str) -> np.ndarray:
    """A one-dimensional int64 host array with entries in [0, n) from a host sequence."""
    if not isinstance(idx, (np.ndarray, list, tuple, range)):
        raise TypeError(f"{name} must be a host int array or sequence, got {type(idx).__name__}")
    a = np.asarray(idx)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.size and (a.min() < 0 or a.max() >= n):
        raise ValueError(f"{name} has entries outside [0, n) for n = {n}")
    return a


def check_delta(delta, name: str = "delta") -> float:
    """A failure probability of kernel thinning, in the open interval (0, 1)."""
    return check_real(delta, name, lo=0.0, hi=1.0, lo_open=True, hi_open=True)


def host_vector(a, name: str, dtype=np.float64) -> np.ndarray:
    """A 1-D host copy of a NumPy / array-API vector or a sequence (one explicit transfer)."""
    if isinstance(a, (list, tuple, range)):
        a = np.asarray(a)
    elif not isinstance(a, np.ndarray):
        a = aa.to_host(a, dtype)
    a = np.ascontiguousarray(a)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if dtype is np.int64:
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
        return a.astype(np.int64, copy=False)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    return a.astype(np.float64, copy=False)

"""The map's inputs: X and S as dask arrays chunked along rows, from dask arrays, arrays in
memory, or chain files read lazily on the workers (only headers are read on the driver)."""

from __future__ import annotations

import math
import os
import zipfile

import numpy as np

from .. import _io
from .runtime import import_dask

__all__ = ["as_dask", "same_files", "check_real_dtype"]


def shape_2d(shape):
    return (shape[0], 1) if len(shape) == 1 else tuple(shape)


def lazy_file(spec: str, keys, name: str, only_array: bool = True):
    """A dask array (one chunk) reading ``spec`` (``.npy`` or ``file.npz[:key]``, the array
    chosen by :func:`stein_coreset._io.npz_member`) on a worker; only the header is read here
    (a memory map in the graph would be pickled, whole, through the scheduler)."""
    dask, da = import_dask()
    path, key = _io.split_key(spec)
    if not os.path.exists(path):
        raise ValueError(f"{name}: file not found: {path}")
    low = path.lower()
    _io.check_array_file(path, name)
    if low.endswith(".npz"):
        with zipfile.ZipFile(path) as z:
            members = [m[:-4] for m in z.namelist() if m.endswith(".npy")]
        key = _io.npz_member(path, members, key, keys, name, only_array=only_array)
        what = f"{name}: {path}:{key}"
    elif low.endswith(".npy"):
        key, what = None, f"{name}: {path}"
    else:
        raise ValueError(f"{name}: unsupported file type {spec!r}; use .npy or .npz")
    shape, dtype = _io.array_file_header(path, key)
    check_real_dtype(dtype, what)
    return da.from_delayed(dask.delayed(_io.read_array_2d)(path, key), shape_2d(shape),
                           dtype=np.float64)


def same_files(X, S) -> bool:
    """Whether X and S name the same files (the points-and-scores ``.npz`` of each chain)."""
    def names(A):
        if isinstance(A, (str, os.PathLike)):
            return [os.fspath(A)]
        if isinstance(A, (list, tuple)) and all(isinstance(a, (str, os.PathLike)) for a in A):
            return [os.fspath(a) for a in A]
        return None

    nx = names(X)
    return nx is not None and nx == names(S)


def check_real_dtype(dtype, what: str) -> None:
    """Real numbers only: a complex input used to lose its imaginary part on the workers (the
    warning only in a worker log)."""
    if np.dtype(dtype).kind not in "fiub":
        raise TypeError(f"{what} must hold real numbers, got dtype {np.dtype(dtype)}")


def as_dask(A, name: str, keys, only_array: bool = True):
    """X or S as a dask array chunked along rows only (``only_array``: see :func:`_lazy_file`)."""
    dask, da = import_dask()
    if isinstance(A, da.Array):
        out = A
    elif isinstance(A, (str, os.PathLike)):
        out = lazy_file(os.fspath(A), keys, name, only_array)
    elif isinstance(A, (list, tuple)):
        if len(A) == 0:
            raise ValueError(f"{name}: the list of chains is empty")
        parts = []
        for i, a in enumerate(A):
            if isinstance(a, (str, os.PathLike)):
                p = lazy_file(os.fspath(a), keys, f"{name}[{i}]", only_array)
            elif isinstance(a, da.Array):
                p = a
            elif hasattr(a, "shape"):
                a = np.asarray(a)
                p = da.from_array(a, chunks=a.shape if a.ndim else ())
            else:
                raise TypeError(
                    f"{name}[{i}]: expected an array, a dask array or a path, "
                    f"got {type(a).__name__}"
                )
            if p.ndim != 2:
                raise ValueError(f"{name}[{i}]: expected a 2-D (n, d) array, got shape {p.shape}")
            if p.shape[0] == 0:
                raise ValueError(f"{name}[{i}]: chain {i} is empty (0 rows)")
            p = p.rechunk({1: -1})
            if parts and p.shape[1] != parts[0].shape[1]:
                # before: dask's raw ('Shapes do not align: %s', [...]) tuple as the message
                raise ValueError(
                    f"{name}[{i}]: chain {i} has points of dimension d = {p.shape[1]}, but "
                    f"chain 0 has d = {parts[0].shape[1]}; every chain must sample the same "
                    "d-dimensional target"
                )
            parts.append(p)
        out = da.concatenate(parts, axis=0)
    else:
        raise TypeError(
            f"{name}: expected a dask.array, a list of per-chain arrays or paths, "
            f"got {type(A).__name__} (wrap a NumPy array with dask.array.from_array)"
        )
    if out.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D (n, d) array, got shape {out.shape}")
    check_real_dtype(out.dtype, name)
    if any(math.isnan(c) for c in out.chunks[0]):
        raise ValueError(f"{name}: unknown chunk sizes; call compute_chunk_sizes() first")
    if len(out.chunks[1]) != 1:
        out = out.rechunk({1: -1})
    return out

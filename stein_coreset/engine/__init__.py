"""The kernel engine: the one place that evaluates k_P and runs the compiled loops.

:class:`KernelMatrix` is the lens every algorithm has on k_P; it holds one :class:`Backend`
(``"cpu"``: the C++ of ``_core``; ``"cuda"``: CUDA kernels compiled at run time;
``"xp"``: the array-API reference), chosen once by :func:`get_backend`. Algorithms and
estimators call the backend's operations and never test its name. :func:`capability_table`
says which backend runs which operation (docs/engine.md).
"""

from __future__ import annotations

from . import native
from .arrays import SLAB_ENTRIES, squared_distances
from .backend import (
    BACKENDS,
    COMPILED_KERNELS,
    OPERATIONS,
    Backend,
    capability_table,
    check_backend,
    compiled_kernel,
    get_backend,
    is_compiled_kernel,
)
from .cpu import CpuBackend
from .cuda import CudaBackend
from .matrix import (
    KernelMatrix,
    Whitening,
    check_kernel_matrix,
    median_pairwise_distance,
    with_threads,
)
from .xp import XpBackend

__all__ = [
    "Backend",
    "BACKENDS",
    "OPERATIONS",
    "CpuBackend",
    "CudaBackend",
    "XpBackend",
    "KernelMatrix",
    "Whitening",
    "squared_distances",
    "median_pairwise_distance",
    "check_kernel_matrix",
    "with_threads",
    "SLAB_ENTRIES",
    "COMPILED_KERNELS",
    "compiled_kernel",
    "is_compiled_kernel",
    "check_backend",
    "get_backend",
    "capability_table",
    "native",
]

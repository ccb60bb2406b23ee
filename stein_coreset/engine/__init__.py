"""The kernel engine: the one place that evaluates k_P and runs the compiled loops.

:class:`KernelMatrix` is the lens every algorithm has on k_P; it holds one :class:`Backend`,
chosen once by :func:`get_backend`, and each of its operations asks :func:`runner` who runs it
(the backend, or the fallback it declares for the sizes at hand). The protocol
(:mod:`.protocol`) declares every operation; each backend is one folder holding all of its
code: :mod:`.cpu` (the C++ of ``cpu/src_cpp`` through its Cython bridge), :mod:`.cuda` (the CUDA
of ``cuda/src_cuda``, compiled at run time), :mod:`.reference` (the array-API loops, the
``"xp"`` backend). Algorithms and estimators call the matrix's operations and never test a
backend's name; :func:`capability_table` says which backend runs which operation
(docs/engine.md).
"""

from __future__ import annotations

from .arrays import SLAB_ENTRIES, squared_distances
from .cpu import CpuBackend
from .cpu.bridge import BASE_KERNEL_CODES, score_field_figures, score_field_rows
from .cuda import CudaBackend
from .dispatch import (
    BACKENDS,
    COMPILED_KERNELS,
    capability_table,
    check_backend,
    compiled_kernel,
    get_backend,
    is_compiled_kernel,
    runner,
)
from .matrix import (
    KernelMatrix,
    Whitening,
    check_kernel_matrix,
    median_pairwise_distance,
    stein_moments,
    with_threads,
)
from .protocol import OPERATIONS, Backend, Operation
from .reference import ReferenceBackend

__all__ = [
    "Backend",
    "Operation",
    "BACKENDS",
    "OPERATIONS",
    "CpuBackend",
    "CudaBackend",
    "ReferenceBackend",
    "KernelMatrix",
    "Whitening",
    "squared_distances",
    "median_pairwise_distance",
    "score_field_rows",
    "score_field_figures",
    "stein_moments",
    "check_kernel_matrix",
    "with_threads",
    "SLAB_ENTRIES",
    "BASE_KERNEL_CODES",
    "COMPILED_KERNELS",
    "compiled_kernel",
    "is_compiled_kernel",
    "check_backend",
    "get_backend",
    "runner",
    "capability_table",
]

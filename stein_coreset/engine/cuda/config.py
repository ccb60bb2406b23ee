"""What the host code of the ``cuda`` backend assumes of the device build, and the switches
between its device implementations.

The constants are the launch geometry and step counts the kernels of ``src_cuda/`` were written for
(read by :mod:`.kernel`, :mod:`.amd` and :mod:`.dksd` as attributes of this module, so a test may
change one); :data:`CONFIG` is what the tests' CPU simulator replaces (smaller blocks and warps, its
own compiler). ``STEIN_CORESET_CUDA_LOOP`` and ``STEIN_CORESET_CUDA_AMD`` choose between two device
implementations until a GPU timing settles them (docs/gpu.md); they are read here only.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

__all__ = ["Config", "CONFIG", "loop_mode", "loop_blocks", "amd_mode", "BLOCK", "WARP",
           "GRAPH_STEPS", "SYNC_EVERY", "MAX_GRID_Y", "PERSISTENT_STEPS", "AMD_KPL",
           "AMD_MAX_BLOCK", "WRPC_MAX_RANK", "KTS_MAX_CORESETS", "DKSD_ROWS", "DKSD_REGISTER_D"]

#: Threads per block of every kernel in the NVRTC build (SC_BLOCK in src_cuda/common.cuh); the host
#: code reads it from :data:`CONFIG`.
BLOCK = 256
#: Dependent steps captured in one CUDA graph and replayed.
GRAPH_STEPS = 256
#: Graph replays between two host synchronisations (where Ctrl-C and progress are seen).
SYNC_EVERY = 8
#: Largest grid.y (the number of coresets one KT-SPLIT round runs side by side).
MAX_GRID_Y = 65535
#: Steps of one persistent launch (the host waits between launches: Ctrl-C, progress).
PERSISTENT_STEPS = 4096
#: Lanes of a warp in the NVRTC build (SC_WARP in src_cuda/common.cuh); the host code reads it from
#: :data:`CONFIG`.
WARP = 32
#: Columns of F each lane of the fused AMD kernel holds (its variants amd_lowrank_k<KPL>).
AMD_KPL = (1, 2, 4, 8, 16, 32)
#: Most threads per block of the fused AMD kernel: its warps stream F's rows, so more warps
#: on a multiprocessor keep more of F's bytes in flight (:func:`amd_grid`).
AMD_MAX_BLOCK = 1024
#: Largest rank of the device's weighted RPCholesky loop (WRPC_MAX_RANK in src_cuda/rpcholesky.cu:
#: the pivot's row of F in shared memory); larger ranks take the array-API loop.
WRPC_MAX_RANK = 4096
#: Most coresets a persistent KT-SPLIT round decides per step (KTS_MAX_CORESETS in
#: src_cuda/kt_split.cu); deeper rounds take the graph loop.
KTS_MAX_CORESETS = 1024
#: Rows of one partial sum of the DKSD pass (kRows of engine/cpu/src_cpp/dksd.cpp): the rows'
#: values are added in chunks of this many, then the chunks in order, as the C++ adds them.
DKSD_ROWS = 16
#: Largest d whose DKSD adjoint sums the CUDA rows keep in registers (dksd_rows_d<d> and
#: dksd_rows_full_d<d> in src_cuda/dksd.cu), for a diagonal and a full diffusion; larger d add into
#: device memory (dksd_rows).
DKSD_REGISTER_D = {False: 8, True: 4}


@dataclasses.dataclass
class Config:
    """What the host code assumes of the device build: ``block`` threads per block and
    ``warp`` lanes (SC_BLOCK, SC_WARP of the CUDA source), and ``compiler``, which turns a
    module's source into an object with ``get_function(name)`` (``compiler(source, options,
    device_id)``; None: ``cupy.RawModule`` with ``source.NVRTC_OPTIONS``). :data:`CONFIG` is the
    one instance; the tests' CPU simulator sets its fields (smaller blocks and warps, its own
    compiler), and each module is compiled once per configuration."""

    block: int = BLOCK
    warp: int = WARP
    compiler: Callable | None = None


#: The configuration the host code reads (:class:`Config`).
CONFIG = Config()


def loop_mode() -> str:
    """How the greedy loops run on the device: "persistent" (one block per multiprocessor, a
    grid barrier per step, PERSISTENT_STEPS steps a launch) or "graph" (one launch per step,
    replayed from CUDA graphs). ``STEIN_CORESET_CUDA_LOOP`` chooses; default "persistent"."""
    mode = os.environ.get("STEIN_CORESET_CUDA_LOOP", "persistent")
    if mode not in ("persistent", "graph"):
        raise ValueError(f"STEIN_CORESET_CUDA_LOOP must be 'persistent' or 'graph', got {mode!r}")
    return mode


def loop_blocks(sms: int) -> int:
    """Most blocks of the persistent argmin loops (Stein thinning, KT-SPLIT, KT-Swap-LS): one
    per multiprocessor, or ``STEIN_CORESET_CUDA_LOOP_BLOCKS`` (a positive integer) when that is
    fewer, a knob for timing the grid barrier against the work per block. Their picks do not
    depend on it (a lexicographic argmin over any partition)."""
    most = os.environ.get("STEIN_CORESET_CUDA_LOOP_BLOCKS", "")
    if not most:
        return int(sms)
    if not most.isdigit() or int(most) < 1:
        raise ValueError(f"STEIN_CORESET_CUDA_LOOP_BLOCKS must be a positive integer, got {most!r}")
    return min(int(sms), int(most))


def amd_mode() -> str:
    """How AMD's steps on a low-rank K' run on the device: "fused" (default:
    :func:`amd_lowrank`, one persistent kernel per PERSISTENT_STEPS steps, reading the float32
    factor once a step) or "xp" (the array-API loop: some twenty CuPy kernels a step and two
    passes over the float64 rounded factor, four times the bytes, plus that second (n, r)
    copy). ``STEIN_CORESET_CUDA_AMD`` chooses. The fused kernel gives the C++ loop's steps on
    the CPU simulator (tests/support/cudasim); it has not yet run on a GPU, where
    tests/test_cuda_backend.py checks it (``tools/device/device_run.sh check``) and
    ``tools/device/gpu_large.py --amd`` times the two."""
    mode = os.environ.get("STEIN_CORESET_CUDA_AMD", "fused")
    if mode not in ("xp", "fused"):
        raise ValueError(f"STEIN_CORESET_CUDA_AMD must be 'xp' or 'fused', got {mode!r}")
    return mode

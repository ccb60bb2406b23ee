"""The ``cuda`` backend of the kernel engine: k_P and the greedy loops as CUDA kernels.

The kernels (``kernels.cu`` beside this file) are compiled at run time by NVRTC through
``cupy.RawModule``, so building and installing the package needs no CUDA toolkit and the wheel
stays CPU-only. The base-kernel list and the scalar math are ``base_kernels.inc`` and
``radial.inc``, the files the C++ of ``_core`` is built from (src_cpp/, installed beside this
module); :func:`cuda_source` puts the NVRTC prelude, those files and ``kernels.cu`` together.
Everything here is float64.

Only :class:`~stein_coreset.engine.KernelMatrix` creates a :class:`CudaKernel` (when its
backend is ``"cuda"``), and only the engine's loop module calls the loops.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import math
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["CudaKernel", "cuda_source", "nvrtc_prelude", "KNOWN_BASES", "NVRTC_OPTIONS",
           "Config", "CONFIG", "PersistentLaunchError", "launch_persistent", "persistent_grid",
           "loop_mode", "loop_blocks", "amd_mode", "amd_grid", "amd_launch",
           "amd_lowrank", "amd_lowrank_fits", "amd_rounding_tolerance", "dksd_pass", "DKSD_ROWS",
           "DKSD_REGISTER_D", "SOURCES", "SHARED"]

_HERE = Path(__file__).resolve().parent

#: NVRTC options: C++17 and no fused multiply-add contraction, so each entry is rounded as the
#: portable C++ evaluator rounds it.
NVRTC_OPTIONS = ("--std=c++17", "--fmad=false")

# What NVRTC needs before the shared C++ text: int64_t, and radial.inc's primitives and function
# qualifier in CUDA's spelling (the C++ compiler takes their defaults).
_PRELUDE = """\
typedef long long int64_t;
#define SC_TARGET __device__
#define SC_SQRT(x) sqrt(x)
#define SC_POW(x, y) pow(x, y)
#define SC_BITS_TO_I64(x, out) ((out) = __double_as_longlong(x))
#define SC_I64_TO_BITS(i, out) ((out) = __longlong_as_double(i))
"""

#: Threads per block of every kernel in the NVRTC build (SC_BLOCK in kernels.cu); the host
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
#: Lanes of a warp in the NVRTC build (SC_WARP in kernels.cu); the host code reads it from
#: :data:`CONFIG`.
WARP = 32
#: Columns of F each lane of the fused AMD kernel holds (its variants amd_lowrank_k<KPL>).
AMD_KPL = (1, 2, 4, 8, 16, 32)
#: Most threads per block of the fused AMD kernel: its warps stream F's rows, so more warps
#: on a multiprocessor keep more of F's bytes in flight (:func:`amd_grid`).
AMD_MAX_BLOCK = 1024
#: Largest rank of the device's weighted RPCholesky loop (WRPC_MAX_RANK in kernels.cu: the
#: pivot's row of F in shared memory); larger ranks take the array-API loop.
WRPC_MAX_RANK = 4096
#: Most coresets a persistent KT-SPLIT round decides per step (KTS_MAX_CORESETS in kernels.cu);
#: deeper rounds take the graph loop.
KTS_MAX_CORESETS = 1024
#: Rows of one partial sum of the DKSD pass (kRows of src_cpp/dksd.cpp): the rows' values are
#: added in chunks of this many, then the chunks in order, as the C++ adds them.
DKSD_ROWS = 16
#: Largest d whose DKSD adjoint sums the CUDA rows keep in registers (dksd_rows_d<d> and
#: dksd_rows_full_d<d> in kernels.cu), for a diagonal and a full diffusion; larger d add into
#: device memory (dksd_rows).
DKSD_REGISTER_D = {False: 8, True: 4}


@dataclasses.dataclass
class Config:
    """What the host code assumes of the device build: ``block`` threads per block and
    ``warp`` lanes (SC_BLOCK, SC_WARP of the CUDA source), and ``compiler``, which turns a
    module's source into an object with ``get_function(name)`` (``compiler(source, options,
    device_id)``; None: ``cupy.RawModule`` with :data:`NVRTC_OPTIONS`). :data:`CONFIG` is the
    one instance; the tests' CPU simulator sets its fields (smaller blocks and warps, its own
    compiler), and each module is compiled once per configuration."""

    block: int = BLOCK
    warp: int = WARP
    compiler: Callable | None = None


#: The configuration the host code reads (:class:`Config`).
CONFIG = Config()


class PersistentLaunchError(RuntimeError):
    """A persistent kernel (one whose blocks meet at a grid barrier) could not run safely: its
    grid does not fit the device at once (refused before launch), or its grid barrier waited
    past its budget (the kernel stopped every block and set its error flag). Names the
    kernel."""


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


#: The C++ text the CUDA sources share with ``_core``, in the order they are put before each
#: source: the base-kernel list, then the scalar math (src_cpp/, installed beside this module).
SHARED = ("base_kernels.inc", "radial.inc")


def _shared_text(name: str) -> str:
    for p in (_HERE / name, _HERE.parents[1] / "src_cpp" / name):
        if p.is_file():
            return p.read_text()
    raise FileNotFoundError(f"{name} (src_cpp/{name}) is not installed beside stein_coreset/_cuda")


def _base_kernel_codes() -> dict[str, int]:
    # the lines X(ID, code, "name", radial) of SC_BASE_KERNELS in base_kernels.inc
    text = _shared_text("base_kernels.inc")
    body = text[text.index("#define SC_BASE_KERNELS(X)"):]
    body = body[: re.search(r"[^\\]\n", body).end()]  # the macro ends at a line without '\'
    line = r'X\(\s*\w+\s*,\s*(\d+)\s*,\s*"(\w+)"\s*,\s*\w+\s*\)'
    return {name: int(code) for code, name in re.findall(line, body)}


#: Base-kernel codes the CUDA source knows, ``{name: code}``: read from src_cpp/base_kernels.inc,
#: the list the CUDA source includes and ``_core`` is built from (so they equal the C++'s,
#: ``engine.native.BASE_KERNEL_CODES``).
KNOWN_BASES = _base_kernel_codes()

#: The CUDA sources beside this module, each compiled as a module of its own: the engine's
#: kernels and loops, and the estimators' DKSD pass (compiled only where a model is fitted).
SOURCES = ("kernels.cu", "dksd.cu")


def nvrtc_prelude() -> str:
    """The text :func:`cuda_source` puts first for NVRTC: ``int64_t`` and the CUDA spellings of
    the macros the shared C++ text uses (``SC_TARGET`` as ``__device__``, ``SC_SQRT``, ...).

    Everything after it in :func:`cuda_source` is CUDA C++ that includes no header, so another
    compiler can build that rest with its own definitions of these names (the tests' CPU
    simulator does)."""
    return _PRELUDE


@functools.cache
def cuda_source(part: str = "kernels.cu") -> str:
    """One module's CUDA source (``part`` one of :data:`SOURCES`): the NVRTC prelude
    (:func:`nvrtc_prelude`), the shared C++ text (:data:`SHARED`: src_cpp/base_kernels.inc and
    src_cpp/radial.inc), then the file."""
    if part not in SOURCES:
        raise ValueError(f"part must be one of {SOURCES}, got {part!r}")
    shared = "".join(_shared_text(name) + "\n" for name in SHARED)
    return nvrtc_prelude() + shared + (_HERE / part).read_text()


_MODULES: dict = {}


def _module(device_id: int, part: str = "kernels.cu"):
    """The compiled module ``part`` on the device, once per :data:`CONFIG`."""
    key = (device_id, part, CONFIG.block, CONFIG.warp, CONFIG.compiler)
    if key not in _MODULES:
        if CONFIG.compiler is not None:
            _MODULES[key] = CONFIG.compiler(cuda_source(part), NVRTC_OPTIONS, device_id)
        else:
            import cupy

            with cupy.cuda.Device(device_id):
                _MODULES[key] = cupy.RawModule(code=cuda_source(part), options=NVRTC_OPTIONS)
    return _MODULES[key]


def _blocks(n: int) -> int:
    return max(1, (int(n) + CONFIG.block - 1) // CONFIG.block)


# ---- persistent launches -------------------------------------------------------------------
# A persistent kernel's blocks meet at a software grid barrier, which needs every block of the
# grid resident at once. That is guaranteed, not assumed: the grid is at most what the device
# holds at once for the kernel (the occupancy query's blocks per multiprocessor times the
# multiprocessors), it is launched cooperatively (cuLaunchCooperativeKernel refuses a grid the
# device cannot hold at once, where a plain launch would start some blocks and hang), one
# persistent launch runs at a time in the process (two Python threads, or Dask's threaded
# scheduler on CuPy blocks, would otherwise share the multiprocessors between two grids that
# each wait for all their blocks), and the barrier's spin is bounded (kernels.cu's
# grid_barrier: past its budget a block sets the error word bar[1] and every block leaves),
# which the host turns into PersistentLaunchError. The cooperative launch goes through the
# driver directly: CuPy's enable_cooperative_groups would also compile relocatable device code
# and link libcudadevrt from a CUDA toolkit, which the kernels (no cooperative_groups) do not
# need and a pip-installed CuPy lacks.

#: One persistent launch at a time in the process (:func:`launch_persistent`).
PERSISTENT_LOCK = threading.RLock()

_C_SCALARS = {np.dtype(np.int64): ctypes.c_int64, np.dtype(np.int32): ctypes.c_int32,
              np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.float64): ctypes.c_double,
              np.dtype(np.float32): ctypes.c_float}


def _function_handle(fn) -> int:
    """The driver's CUfunction of a compiled kernel (``cupy.RawKernel.kernel.ptr``)."""
    return int(fn.kernel.ptr)


def _resident_capacity(fn, threads: int, device_id: int) -> tuple[int, int]:
    """(blocks of ``threads`` threads of ``fn`` one multiprocessor holds at once, the device's
    multiprocessors): the occupancy query the driver's cooperative launch checks against."""
    import cupy

    per_sm = int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
        _function_handle(fn), int(threads), 0))
    return per_sm, _multiprocessors(device_id)


def persistent_grid(fn, name: str, threads: int, want: int, device_id: int) -> int:
    """Blocks of a persistent launch of ``fn`` (``name`` for messages): ``want`` (one block
    per multiprocessor, capped by the work, by the caller), at most what the device holds at
    once (occupancy query x multiprocessors). PersistentLaunchError if not even one block of
    ``threads`` threads fits a multiprocessor (registers or shared memory grew)."""
    per_sm, sms = _resident_capacity(fn, threads, device_id)
    if per_sm < 1:
        raise PersistentLaunchError(
            f"{name}: a block of {threads} threads does not fit a multiprocessor of device "
            f"{device_id} (occupancy 0); its grid barrier needs every block resident")
    return max(1, min(int(want), per_sm * sms))


def _kernel_params(args):
    """The driver's ``void**`` for ``args`` (CuPy arrays: their device pointers; NumPy
    scalars: their values), and the ctypes objects that must outlive the launch."""
    vals = []
    for a in args:
        if isinstance(a, np.generic):
            vals.append(_C_SCALARS[a.dtype](a.item()))
        else:
            vals.append(ctypes.c_void_p(int(a.data.ptr)))
    arr = (ctypes.c_void_p * max(1, len(vals)))(*[ctypes.addressof(v) for v in vals])
    return arr, vals


def launch_persistent(fn, name: str, grid: int, threads: int, args, stream, bar,
                      device_id: int) -> None:
    """Launch the persistent kernel ``fn`` (``name``) cooperatively on ``grid`` blocks of
    ``threads`` threads, wait for it, and check its grid barrier's error word ``bar[1]``
    (``bar`` is its (2,) uint32 barrier array, zero at the first launch). Holds
    :data:`PERSISTENT_LOCK` throughout. PersistentLaunchError, naming the kernel, when the grid
    exceeds what the device holds at once (before anything runs) or when the barrier timed
    out."""
    import cupy

    with PERSISTENT_LOCK:
        per_sm, sms = _resident_capacity(fn, threads, device_id)
        if int(grid) > per_sm * sms:
            raise PersistentLaunchError(
                f"{name}: a grid of {grid} blocks of {threads} threads exceeds the {per_sm * sms} "
                f"that device {device_id} holds at once ({per_sm} per multiprocessor x {sms}); "
                f"its grid barrier needs every block resident")
        params, keep = _kernel_params(args)
        try:
            cupy.cuda.driver.launchCooperativeKernel(
                _function_handle(fn), int(grid), 1, 1, int(threads), 1, 1, 0, stream.ptr,
                ctypes.addressof(params))
        except cupy.cuda.driver.CUDADriverError as e:
            raise PersistentLaunchError(f"{name}: the cooperative launch of {grid} blocks of "
                                        f"{threads} threads failed: {e}") from e
        stream.synchronize()
        del keep
        if int(cupy.asnumpy(bar[1:2])[0]) != 0:
            raise PersistentLaunchError(
                f"{name}: its grid barrier waited past its budget (SC_BARRIER_BUDGET clock "
                f"cycles) and every block stopped; a block of the grid was not running (another "
                f"process's kernels on the device, MPS, a debugger) or a step hung")


def _multiprocessors(device_id: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def amd_lowrank_fits(r: int) -> bool:
    """Whether the fused AMD kernel takes a factor of rank r (r <= warp * max(AMD_KPL))."""
    return 0 < int(r) <= CONFIG.warp * AMD_KPL[-1]


def amd_grid(n: int, sms: int, max_threads: int) -> tuple[int, int]:
    """(blocks, threads per block) of the fused AMD kernel for n rows: one block per
    multiprocessor (its grid barrier needs every block resident; fewer blocks when n is
    small), each of BLOCK threads, grown by whole warps up to AMD_MAX_BLOCK and to
    ``max_threads`` (the kernel's limit on the device, set by its registers) while every warp
    still gets about WARP rows (one batch: a lane loads one row's scalars)."""
    block, warp = CONFIG.block, CONFIG.warp
    wpb0 = block // warp
    nb = max(1, min(int(sms), -(-int(n) // wpb0)))
    most = max(1, min(AMD_MAX_BLOCK, int(max_threads)) // warp)
    want = -(-int(n) // (nb * warp))
    return nb, max(min(wpb0, most), min(most, want)) * warp


def _amd_kernel(r: int) -> str:
    """The fused AMD kernel for rank r: the smallest lanes-per-row count that covers r."""
    return f"amd_lowrank_k{next(k for k in AMD_KPL if CONFIG.warp * k >= r)}"


def amd_launch(n: int, r: int, device_id: int):
    """(function, blocks, threads per block) of the fused AMD kernel for an (n, r) factor on
    the device: the kernel instantiated for the smallest lanes-per-row count that covers r,
    and its grid (:func:`amd_grid`, at most what the device holds at once:
    :func:`persistent_grid`)."""
    name = _amd_kernel(r)
    fn = _module(device_id).get_function(name)
    nb, threads = amd_grid(n, _multiprocessors(device_id), fn.max_threads_per_block)
    return fn, persistent_grid(fn, name, threads, nb, device_id), threads


def amd_lowrank(F, res, w, v, t0: int, steps: int, eta: float, progress=None) -> None:
    """AMD steps t0+1..t0+steps (Alg. F.2) on K' = F F^T + diag(res), on the device, in place
    on (w, v): the steps of ``src_cpp/amd.cpp`` (same updates, log domain, online-max sums),
    fused in one persistent kernel that reads each row of F once per step and synchronises the
    grid once per step, launched every PERSISTENT_STEPS steps (the host waits between launches:
    Ctrl-C, ``progress(steps done)``).

    F is a C-ordered (n, r) float32 CuPy array, res, w, v (n,) float64 CuPy arrays on F's
    device; r must satisfy :func:`amd_lowrank_fits`. The sums run in a fixed order set by the
    grid (:func:`amd_grid`: n, the device's multiprocessors and the kernel's registers), so a
    device gives the same weights every run; they differ from the C++ loop's by the order of
    the double sums only."""
    import cupy as cp

    n, r = int(F.shape[0]), int(F.shape[1])
    steps = int(steps)
    if not amd_lowrank_fits(r):
        raise ValueError(f"the fused AMD kernel takes rank 1..{CONFIG.warp * AMD_KPL[-1]}, "
                         f"got {r}")
    if steps <= 0 or n == 0:
        return
    for name, a in (("w", w), ("v", v)):
        if a.dtype != np.float64 or a.shape != (n,) or not a.flags.c_contiguous:
            raise ValueError(f"{name} must be a contiguous ({n},) float64 array")
    device_id = int(F.device.id)
    with cp.cuda.Device(device_id):
        F = cp.ascontiguousarray(F, dtype=cp.float32)
        res = cp.ascontiguousarray(res, dtype=cp.float64)
        fn, nb, threads = amd_launch(n, r, device_id)
        wpb = threads // CONFIG.warp
        P = 2 * r + 2
        logv = cp.empty(n, dtype=cp.float64)
        Ftw = cp.zeros(r, dtype=cp.float64)
        Ftv = cp.zeros(r, dtype=cp.float64)
        part = cp.empty(2 * nb * P, dtype=cp.float64)
        wpart = cp.empty(nb * wpb * P, dtype=cp.float64)
        st = cp.zeros(2, dtype=cp.float64)
        bar = cp.zeros(2, dtype=cp.uint32)  # the grid barrier's word and its error word
        stream = cp.cuda.Stream(non_blocking=True)
        cp.cuda.Device(device_id).synchronize()  # w, v as the work queued before left them
        with stream:
            for s0 in range(0, steps, PERSISTENT_STEPS):
                s1 = min(steps, s0 + PERSISTENT_STEPS)
                launch_persistent(fn, _amd_kernel(r), nb, threads, (
                    F, res, np.int64(n), np.int32(r), w, v, logv, Ftw, Ftv, part, wpart, st,
                    bar, np.int64(t0), np.int64(s0), np.int64(s1), np.int64(steps),
                    np.float64(eta),
                ), stream, bar, device_id)
                if progress is not None:
                    progress(s1)


def amd_rounding_tolerance(F, res, steps: int, eta: float | None = None) -> float:
    """A relative tolerance for comparing AMD weights from two backends on K' = F F^T +
    diag(res) after ``steps`` steps of size ``eta`` (default AMD's ``1 / (8 max_i K'_ii)``):
    how far rounding F to float32 alone moves the weights, to first order.

    Every backend steps on F rounded to float32 (relative error u = 2^-24 an entry), and the
    device and the C++ then differ only by their double sums' order and the last bits of exp
    and log (~1e-16 relative, far below u), so a correct kernel is well inside this bound and a
    wrong one (a missed term, a skipped warp) far outside it. The derivation: with |dF_ik| <=
    u |F_ik| and z_t a probability vector, the step's gradient g = K' z_t moves by
    |dg_i| <= |dF_i . F^T z| + |F_i . dF^T z| <= 2 u A, A = max_i ||F_i||_1 max_jk |F_jk|; step t
    adds 2 t eta g_i to log v_i and its normaliser moves by at most as much, so log v_i moves by
    at most 8 t eta u A; summed over t = 1..T that is 4 eta u A T (T + 1), and v, and w (an
    average of v's), move by at most its expm1 relative. First order: the feedback of the
    moved weights on z_t is left out (mirror descent damps it)."""
    F = np.asarray(F, dtype=np.float64)
    res = np.asarray(res, dtype=np.float64)
    T = int(steps)
    if eta is None:
        eta = 1.0 / (8.0 * float(np.max(np.sum(F * F, axis=1) + res)))
    Fa = np.abs(F)
    A = float(np.max(np.sum(Fa, axis=1)) * np.max(Fa)) if F.size else 0.0
    return float(np.expm1(4.0 * float(eta) * 2.0 ** -24 * A * T * (T + 1)))


def dksd_pass(U, V, F, full: bool, base, sigma, beta, lam, need_grad: bool):
    """The DKSD pair pass (Barp et al., 2019, Eq. 7; ``src_cpp/dksd.hpp``) on the device:
    ``(total, Gv, Gf)`` as ``_core.dksd_pass`` returns them, Gv (n, d) and Gf (F's shape)
    CuPy arrays, or None without ``need_grad``.

    U, V are (n, d) CuPy arrays, F the diffusion in canonical form ((n, d), or (n, d, d) when
    ``full``) on their device; base, sigma, beta, lam host sequences, one entry per component.
    One thread per row sums its pairs in column order (``dksd_rows`` of dksd.cu: the terms of
    radial.inc; its adjoint sums in registers for d <= :data:`DKSD_REGISTER_D`) and the host
    adds the (n,) row values in chunks of :data:`DKSD_ROWS`, so value and adjoints are the
    C++'s to rounding (the C++ sums a row in vectorised column blocks). O(n^2 d) work
    (O(n^2 d^2) with a full diffusion), O(n d) memory (O(n d^2) full)."""
    import cupy as cp

    n, d = int(U.shape[0]), int(U.shape[1])
    if n < 2 or d < 1:
        raise ValueError("dksd_pass needs at least 2 points and 1 coordinate")
    fs = n * d * d if full else n * d
    params = [np.asarray(a).reshape(-1) for a in (base, sigma, beta, lam)]
    if any(a.size != d for a in params):
        raise ValueError("base, sigma, beta and lam need one entry per coordinate")
    codes, sig, bet, lm = params
    if not np.all(np.isin(codes, list(KNOWN_BASES.values()))):
        raise ValueError(f"unknown base kernel code in {codes.tolist()}")
    shared = bool(np.all(codes == codes[0]) and np.all(sig == sig[0]) and np.all(bet == bet[0]))
    device_id = int(U.device.id)
    with cp.cuda.Device(device_id):
        U = cp.ascontiguousarray(U, dtype=cp.float64)
        V = cp.ascontiguousarray(V, dtype=cp.float64)
        Ff = cp.ascontiguousarray(F, dtype=cp.float64).reshape(-1)
        if Ff.size != fs:
            raise ValueError(f"F must have {fs} entries, got {Ff.size}")
        rows = cp.empty(n, dtype=cp.float64)
        Gv = cp.empty((n, d) if need_grad else 1, dtype=cp.float64)
        Gf = cp.empty(fs if need_grad else 1, dtype=cp.float64)
        c = 1.0 / (float(n) * float(n - 1))
        args = (U, V, Ff, np.int64(n), np.int32(d), cp.asarray(codes.astype(np.int32)),
                cp.asarray(sig.astype(np.float64)), cp.asarray(bet.astype(np.float64)),
                cp.asarray(lm.astype(np.float64)), np.int32(shared), np.float64(c),
                np.int32(bool(need_grad)), rows, Gv, Gf)
        if need_grad and d <= DKSD_REGISTER_D[bool(full)]:
            name = f"dksd_rows_{'full_' if full else ''}d{d}"
        else:
            name, args = "dksd_rows", args + (np.int32(bool(full)),)
        _module(device_id, "dksd.cu").get_function(name)((_blocks(n),), (CONFIG.block,), args)
        r = cp.asnumpy(rows)
    chunks = np.zeros(-(-n // DKSD_ROWS) * DKSD_ROWS)
    chunks[:n] = r
    # cumsum adds in sequence: each chunk's rows in order, then the chunks in order
    total = float(np.cumsum(np.cumsum(chunks.reshape(-1, DKSD_ROWS), axis=1)[:, -1])[-1])
    if not need_grad:
        return total, None, None
    return total, Gv, Gf.reshape((n, d, d) if full else (n, d))


class CudaKernel:
    """k_P on n fixed points held on one CUDA device (whitened points U, scores T, centring).

    Parameters mirror :class:`~stein_coreset.engine.KernelMatrix`: ``code`` the base kernel's
    code (:data:`KNOWN_BASES`), ``sigma``, ``beta``, CuPy arrays ``U`` (n, d), ``T`` (n, d) or
    None, ``mean`` (n,) or None, and ``mean_all``.
    """

    def __init__(self, code: int, sigma: float, beta: float, U, T=None, mean=None,
                 mean_all: float = 0.0):
        import cupy

        self.cp = cupy
        self.device_id = int(U.device.id)
        with cupy.cuda.Device(self.device_id):
            self.U = cupy.ascontiguousarray(U, dtype=cupy.float64)
            self.n, self.d = int(U.shape[0]), int(U.shape[1])
            dummy = cupy.zeros(1, dtype=cupy.float64)
            self.T = dummy if T is None else cupy.ascontiguousarray(T, dtype=cupy.float64)
            self.mean = dummy if mean is None else cupy.ascontiguousarray(mean, dtype=cupy.float64)
        self._params = (
            self.U, self.T, self.mean, np.int64(self.n), np.int32(self.d), np.int32(code),
            np.int32(T is not None), np.int32(mean is not None), np.float64(sigma),
            np.float64(beta), np.float64(mean_all),
        )
        self.sms = None
        self._finite = None  # check_finite's answer, once known

    # ---- plumbing -----------------------------------------------------------------------
    def _fn(self, name: str):
        return _module(self.device_id).get_function(name)

    def _dev(self):
        return self.cp.cuda.Device(self.device_id)

    def _idx(self, a):
        cp = self.cp
        if isinstance(a, cp.ndarray):
            return cp.ascontiguousarray(a, dtype=cp.int64)
        return cp.asarray(np.ascontiguousarray(a, dtype=np.int64))

    def _loop_stream(self):
        """A non-blocking stream for one greedy loop (capture is not allowed on, nor next to,
        the legacy default stream), after the device has finished the work queued before."""
        self.cp.cuda.Device(self.device_id).synchronize()
        return self.cp.cuda.Stream(non_blocking=True)

    def _run_steps(self, fn, grid, args, steps: int, stream, progress=None):
        """Launch ``fn`` ``steps`` times in order (each launch one dependent step that reads
        its state from device memory), captured as CUDA graphs of GRAPH_STEPS launches and
        replayed; the host waits every SYNC_EVERY replays, so KeyboardInterrupt and progress
        are seen there. Extra launches must be no-ops (the kernels check their step count)."""
        if steps <= 0:
            return
        g = min(steps, GRAPH_STEPS)
        graph = None
        with stream:
            try:
                stream.begin_capture()
                for _ in range(g):
                    fn(grid, (CONFIG.block,), args)
                graph = stream.end_capture()
            except Exception:  # capture unsupported: plain launches
                graph = None
                try:
                    stream.end_capture()
                except Exception:
                    pass
            done = 0
            replays = 0
            while done < steps:
                if graph is not None:
                    graph.launch(stream)
                    done += g
                else:
                    for _ in range(min(g, steps - done)):
                        fn(grid, (CONFIG.block,), args)
                    done += min(g, steps - done)
                replays += 1
                if replays % SYNC_EVERY == 0 or done >= steps:
                    stream.synchronize()
                    if progress is not None:
                        progress(min(done, steps))
        stream.synchronize()

    def check_fits(self, nbytes: float, what: str) -> None:
        """Refuse, before allocating, a buffer larger than the device memory free now (the
        driver's free bytes plus what CuPy's pool holds unused), with the estimate."""
        cp = self.cp
        with self._dev():
            free, total = cp.cuda.runtime.memGetInfo()
            pool = cp.get_default_memory_pool()
            avail = free + pool.free_bytes()
        if nbytes > avail:
            raise MemoryError(
                f"{what} needs {nbytes / 2**30:.2f} GiB of device memory; "
                f"{avail / 2**30:.2f} GiB of {total / 2**30:.1f} GiB are free on device "
                f"{self.device_id}"
            )

    # ---- dense evaluations ----------------------------------------------------------------
    def gram(self, rows, cols=None):
        """(len(rows), len(cols) or n) block on the device."""
        cp = self.cp
        with self._dev():
            r = self._idx(rows)
            c = self._idx(np.zeros(1, np.int64) if cols is None else cols)
            nr = int(r.size)
            nc = self.n if cols is None else int(c.size)
            self.check_fits(8.0 * nr * nc, f"a ({nr}, {nc}) float64 kernel block")
            out = cp.empty((nr, nc), dtype=cp.float64)
            if nr and nc:
                self._fn("kp_gram")(
                    (_blocks(nr * nc),), (CONFIG.block,),
                    self._params + (r, np.int64(nr), c, np.int64(nc), np.int32(cols is None), out),
                )
            return out

    def diag(self):
        cp = self.cp
        with self._dev():
            out = cp.empty(self.n, dtype=cp.float64)
            self._fn("kp_diag")((_blocks(self.n),), (CONFIG.block,), self._params + (out,))
            return out

    def _parts(self) -> int:
        """Column chunks of a product: enough blocks in flight to fill the device."""
        return max(1, min(64, math.ceil(8 * self._multiprocessors() / _blocks(self.n))))

    def matvec(self, w):
        """K w for a (n,) device vector; deterministic (fixed chunks summed in order)."""
        cp = self.cp
        n = self.n
        with self._dev():
            w = cp.ascontiguousarray(w, dtype=cp.float64)
            parts = min(self._parts(), n)
            chunk = math.ceil(n / parts)
            parts = math.ceil(n / chunk)
            partial = cp.empty((parts, n), dtype=cp.float64)
            self._fn("kp_matvec_partial")(
                (_blocks(n), parts), (CONFIG.block,), self._params + (w, np.int64(chunk), partial)
            )
            out = cp.empty(n, dtype=cp.float64)
            self._fn("sum_rows")(
                (_blocks(n),), (CONFIG.block,), (partial, np.int64(parts), np.int64(n), out)
            )
            return out

    # ---- the greedy loops ---------------------------------------------------------------------
    def stein_thinning(self, m: int, progress=None) -> np.ndarray:
        """Alg. D.1 for m steps: (m,) host int64 indices in selection order, as the C++ loop
        gives them. One launch per step, the pick kept on the device."""
        self.check_finite()
        if loop_mode() == "persistent":
            return self._stein_thinning_persistent(int(m), progress)
        cp = self.cp
        nb = _blocks(self.n)
        stream = self._loop_stream()
        with self._dev(), stream:
            score = self.diag()
            pval = cp.empty(nb, dtype=cp.float64)
            pidx = cp.empty(nb, dtype=cp.int64)
            state = cp.asarray(np.array([0, -1], dtype=np.int64))
            counter = cp.zeros(1, dtype=cp.uint32)
            out = cp.zeros(int(m), dtype=cp.int64)
            args = self._params + (score, pval, pidx, state, counter, out, np.int64(m))
            self._run_steps(self._fn("st_step"), (nb,), args, int(m), stream, progress)
            return cp.asnumpy(out)

    def _multiprocessors(self) -> int:
        if self.sms is None:
            self.sms = _multiprocessors(self.device_id)
        return self.sms

    def _loop_blocks(self, work: int) -> int:
        """Blocks of a persistent argmin loop over ``work`` items (:func:`loop_blocks`)."""
        return min(loop_blocks(self._multiprocessors()), _blocks(work))

    def _persistent_grid(self, fn, name: str, want: int) -> int:
        """``want`` blocks, at most what the device holds at once (:func:`persistent_grid`)."""
        with self._dev():
            return persistent_grid(fn, name, CONFIG.block, want, self.device_id)

    def _launch_persistent(self, fn, name: str, nb: int, args, stream, bar) -> None:
        launch_persistent(fn, name, nb, CONFIG.block, args, stream, bar, self.device_id)

    def check_finite(self) -> None:
        """Refuse points, scores or centring that are not finite, or a diagonal that
        overflowed, before an argmin loop (Stein thinning, KT-Swap, KT-Swap-LS): the kernels'
        argmin never picks a NaN, but a loop over NaNs has no meaningful pick. Checked once
        per kernel (one device synchronisation)."""
        if self._finite is None:
            cp = self.cp
            with self._dev():
                ok = (cp.isfinite(self.U).all() & cp.isfinite(self.T).all()
                      & cp.isfinite(self.mean).all() & cp.isfinite(self.diag()).all())
                self._finite = bool(ok)
        if not self._finite:
            raise ValueError("X, S: the points, scores or centring on the device hold a NaN or "
                             "an infinity (or k_P(x, x) overflowed), so the device argmin loops "
                             "have no pick; remove or rescale them")

    def _stein_thinning_persistent(self, m: int, progress=None) -> np.ndarray:
        cp = self.cp
        fn = self._fn("st_persistent")
        nb = self._persistent_grid(fn, "st_persistent", self._loop_blocks(self.n))
        stream = self._loop_stream()
        with self._dev(), stream:
            score = self.diag()
            pval = cp.empty(2 * nb, dtype=cp.float64)
            pidx = cp.empty(2 * nb, dtype=cp.int64)
            state = cp.asarray(np.array([0, -1], dtype=np.int64))
            bar = cp.zeros(2, dtype=cp.uint32)  # the grid barrier's word and its error word
            out = cp.zeros(m, dtype=cp.int64)
            for t1 in range(PERSISTENT_STEPS, m + PERSISTENT_STEPS, PERSISTENT_STEPS):
                t1 = min(t1, m)
                self._launch_persistent(fn, "st_persistent", nb, self._params + (
                    score, pval, pidx, state, bar, out, np.int64(t1)), stream, bar)
                if progress is not None:
                    progress(t1)
            return cp.asnumpy(out)

    def weighted_rpcholesky(self, sw, d, Ft, pivots, i0: int, i1: int, u, tol: float) -> int:
        """Steps i0..i1-1 of weighted RPCholesky (Alg. F.1, src_cpp/rpcholesky.cpp) on
        diag(sw) K diag(sw), in place on the device state: d (n,), Ft = F^T (rank, n) and the
        int64 pivots (rank,), C-ordered CuPy arrays; u the host draws of the steps. One
        persistent launch, two grid barriers a step; the step it stopped at (i1 unless the
        residual vanished). Same pivots as the C++ unless a draw falls within rounding of a
        boundary of cumsum(d) (the sum of d is added in another order); the column's terms in
        the C++'s order, so the factors differ by the kernel entries' last bits (~1e-16)."""
        cp = self.cp
        n, rank = self.n, int(Ft.shape[0])
        i0, i1 = int(i0), int(i1)
        if rank > WRPC_MAX_RANK:
            raise ValueError(f"the device RPCholesky loop takes rank <= {WRPC_MAX_RANK}, "
                             f"got {rank}")
        if Ft.shape != (rank, n) or d.shape != (n,) or pivots.shape != (rank,):
            raise ValueError(f"need d ({n},), Ft ({rank}, {n}) and pivots ({rank},)")
        if i1 <= i0:
            return i0
        fn = self._fn("wrpc_persistent")
        nb = self._persistent_grid(fn, "wrpc_persistent",
                                   min(self._multiprocessors(), _blocks(n)))
        stream = self._loop_stream()
        with self._dev(), stream:
            tsum = cp.empty(_blocks(n), dtype=cp.float64)
            part = cp.empty(nb, dtype=cp.float64)
            state = cp.asarray(np.array([i1, -1], dtype=np.int64))
            bar = cp.zeros(2, dtype=cp.uint32)  # the grid barrier's word and its error word
            ud = cp.asarray(np.ascontiguousarray(np.asarray(u)[: i1 - i0], dtype=np.float64))
            self._launch_persistent(fn, "wrpc_persistent", nb, self._params + (
                sw, d, Ft, pivots, np.int64(i0), np.int64(i1), ud, np.float64(tol), tsum,
                part, state, bar), stream, bar)
            return int(cp.asnumpy(state)[0])

    def kt_split(self, idx, t: int, delta: float, uniforms) -> np.ndarray:
        """KT-SPLIT (Alg. D.2's halving, src_cpp/kt_split.hpp) of the host index sequence idx
        with the given uniforms (kt_split's layout): (2^t, N >> t) host int64 coresets."""
        cp = self.cp
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        N = int(idx.size)
        if t <= 0:
            return idx.reshape(1, N).copy()
        base_log_mult = 2.0 * math.log(2.0 * N * t / delta)
        row = N // 2
        stream = self._loop_stream()
        with self._dev(), stream:
            cur = cp.asarray(idx)
            U = cp.asarray(np.ascontiguousarray(uniforms, dtype=np.float64))
            size = N
            for j in range(t):
                ncore = 1 << j
                log_mult = base_log_mult - 2.0 * j * math.log(2.0)
                cur = self._kt_round(cur, size, ncore, U[j * row: j * row + row], log_mult,
                                     stream)
                size //= 2
            return cp.asnumpy(cur).reshape(1 << t, size)

    def kt_halvings(self, blocks, delta: float, uniforms) -> np.ndarray:
        """B independent halvings (src_cpp/kt_split.hpp's kt_halvings) of the rows of the
        (B, N) host int64 blocks with the given uniforms (``_core.kt_halving_uniforms``): one
        KT-SPLIT round of B coresets side by side, (B, 2, N // 2) host int64 halves."""
        cp = self.cp
        blocks = np.ascontiguousarray(blocks, dtype=np.int64)
        B, N = blocks.shape
        half = N // 2
        log_mult = 2.0 * math.log(2.0 * N / delta)
        # a persistent round decides at most KTS_MAX_CORESETS coresets per step
        per = KTS_MAX_CORESETS if loop_mode() == "persistent" else B
        stream = self._loop_stream()
        out = np.empty((B, 2, half), dtype=np.int64)
        with self._dev(), stream:
            U = cp.asarray(np.ascontiguousarray(uniforms, dtype=np.float64))
            for a in range(0, B, max(per, 1)):
                b = min(B, a + per)
                nxt = self._kt_round(cp.asarray(blocks[a:b]).ravel(), N, b - a,
                                     U[a * half: b * half], log_mult, stream)
                out[a:b] = cp.asnumpy(nxt).reshape(b - a, 2, half)
        return out

    def _kt_round(self, cur, size: int, ncore: int, unif, log_mult: float, stream):
        """One KT-SPLIT round on the device: the ncore coresets of ``size`` points in cur
        (device int64, coreset l at l * size) halved side by side with the uniforms unif
        (coreset l's at l * half); returns the 2 ncore halves (left of l at 2 l half)."""
        cp = self.cp
        half = size // 2
        nxt = cp.full(2 * ncore * half, -1, dtype=cp.int64)
        acc = cp.zeros(ncore * half, dtype=cp.float64)
        if loop_mode() == "persistent" and ncore <= KTS_MAX_CORESETS:
            pfn = self._fn("kts_persistent")
            nb = self._persistent_grid(pfn, "kts_persistent", self._loop_blocks(ncore * half))
            sig2b = cp.zeros(nb * ncore, dtype=cp.float64)
            state = cp.zeros(1, dtype=cp.int64)
            bar = cp.zeros(2, dtype=cp.uint32)  # the grid barrier's word and its error word
            for s1 in range(PERSISTENT_STEPS, half + PERSISTENT_STEPS, PERSISTENT_STEPS):
                self._launch_persistent(pfn, "kts_persistent", nb, self._params + (
                    cur, np.int64(size), np.int64(ncore), nxt, acc, sig2b, unif, state,
                    bar, np.float64(log_mult), np.int64(min(s1, half))), stream, bar)
        else:
            sig2 = cp.zeros(ncore, dtype=cp.float64)
            kst = cp.zeros(ncore, dtype=cp.int64)
            counters = cp.zeros(ncore, dtype=cp.uint32)
            args = self._params + (
                cur, np.int64(size), nxt, acc, sig2, unif, kst, counters,
                np.float64(log_mult),
            )
            self._run_steps(self._fn("kts_step"), (_blocks(half), ncore), args, half, stream)
        return nxt

    def kt_swap_ls(self, dense: np.ndarray, order: np.ndarray, splx: bool) -> float:
        """KT-Swap-LS (Alg. G.2, src_cpp/kt_swap_ls.cpp) on the host dense (n,) weights, in
        place, visiting the indices ``order``; returns w^T K w. g = K w is summed over the
        support in the C++'s order and D = w^T g added up in sequence as it does, then the
        swaps run as persistent launches of PERSISTENT_STEPS steps (two grid barriers a step
        that improves, one otherwise): the same swaps and weights as the C++."""
        cp = self.cp
        n = self.n
        order = np.ascontiguousarray(order, dtype=np.int64)
        supp = np.flatnonzero(dense)
        wsupp = np.ascontiguousarray(dense[supp])
        self.check_finite()
        fn = self._fn("ksls_persistent")
        nb = self._persistent_grid(fn, "ksls_persistent", self._loop_blocks(n))
        stream = self._loop_stream()
        with self._dev(), stream:
            w = cp.asarray(np.ascontiguousarray(dense, dtype=np.float64))
            g = cp.zeros(n, dtype=cp.float64)
            sd = cp.asarray(supp.astype(np.int64))
            if supp.size:
                self._fn("ksls_init")((_blocks(n),), (CONFIG.block,), self._params + (
                    sd, cp.asarray(wsupp), np.int64(supp.size), g))
            gs = cp.asnumpy(g[sd])
            D = float(np.cumsum(wsupp * gs)[-1]) if supp.size else 0.0
            kd = self.diag()
            g2 = cp.empty(n, dtype=cp.float64)
            pval = cp.empty(2 * nb, dtype=cp.float64)
            pidx = cp.empty(2 * nb, dtype=cp.int64)
            dstate = cp.asarray(np.array([D], dtype=np.float64))
            bar = cp.zeros(2, dtype=cp.uint32)  # the grid barrier's word and its error word
            od = cp.asarray(order)
            for s0 in range(0, order.size, PERSISTENT_STEPS):
                s1 = min(order.size, s0 + PERSISTENT_STEPS)
                self._launch_persistent(fn, "ksls_persistent", nb, self._params + (
                    w, g, g2, kd, od, np.int64(s0), np.int64(s1), np.int32(bool(splx)), dstate,
                    pval, pidx, bar), stream, bar)
            dense[...] = cp.asnumpy(w)
            return float(cp.asnumpy(dstate)[0])

    def kt_swap_refine(self, I: np.ndarray, passes: int, sorted_sweeps: bool = False) -> int:
        """KT-Swap (Alg. D.3, src_cpp/kt_swap.hpp) on the host int64 coreset I, in place;
        returns the number of swaps. ``sorted_sweeps``: I is sorted before every sweep (the
        sweeps then run one launch sequence each, the pending update of g carried over)."""
        cp = self.cp
        n, nb, m = self.n, _blocks(self.n), int(I.size)
        passes = int(passes)
        self.check_finite()
        stream = self._loop_stream()
        with self._dev(), stream:
            if sorted_sweeps:
                I.sort()
            Id = cp.asarray(np.ascontiguousarray(I, dtype=np.int64))
            g = cp.empty(n, dtype=cp.float64)
            self._fn("kp_index_sum")((nb,), (CONFIG.block,), self._params + (Id, np.int64(m), g))
            dg = self.diag()
            col = cp.empty(n, dtype=cp.float64)
            pval = cp.empty(nb, dtype=cp.float64)
            pidx = cp.empty(nb, dtype=cp.int64)
            state = cp.asarray(np.array([0, -1, 0, 0, 0], dtype=np.int64))
            counter = cp.zeros(1, dtype=cp.uint32)
            fn = self._fn("kts_swap_step")
            sweeps = [passes] if not sorted_sweeps else [1] * passes
            for p, k in enumerate(sweeps):
                if p > 0:  # sort the coreset, keep g and the pending update state[1]
                    Ih = cp.asnumpy(Id)
                    Ih.sort()
                    Id.set(Ih)
                    state[0] = 0
                args = self._params + (
                    g, dg, col, Id, np.int64(m), np.int64(k), pval, pidx, state, counter,
                )
                self._run_steps(fn, (nb,), args, m * k, stream)
                if sorted_sweeps and int(cp.asnumpy(state)[4]):
                    break  # a sweep without a swap ends the loop
            I[...] = cp.asnumpy(Id)
            return int(cp.asnumpy(state)[3])

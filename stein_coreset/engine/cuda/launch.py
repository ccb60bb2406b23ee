"""Persistent launches of the ``cuda`` backend: kernels whose blocks meet at a grid barrier.

A persistent kernel's blocks meet at a software grid barrier, which needs every block of the
grid resident at once. That is guaranteed, not assumed: the grid is at most what the device
holds at once for the kernel (the occupancy query's blocks per multiprocessor times the
multiprocessors), it is launched cooperatively (cuLaunchCooperativeKernel refuses a grid the
device cannot hold at once, where a plain launch would start some blocks and hang), one
persistent launch runs at a time in the process (two Python threads, or Dask's threaded
scheduler on CuPy blocks, would otherwise share the multiprocessors between two grids that
each wait for all their blocks), and the barrier's spin is bounded (src_cuda/common.cuh's
grid_barrier: past its budget a block sets the error word bar[1] and every block leaves),
which the host turns into PersistentLaunchError. The cooperative launch goes through the
driver directly: CuPy's enable_cooperative_groups would also compile relocatable device code
and link libcudadevrt from a CUDA toolkit, which the kernels (no cooperative_groups) do not
need and a pip-installed CuPy lacks.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

__all__ = ["PersistentLaunchError", "PERSISTENT_LOCK", "persistent_grid", "launch_persistent",
           "multiprocessors"]


class PersistentLaunchError(RuntimeError):
    """A persistent kernel (one whose blocks meet at a grid barrier) could not run safely: its
    grid does not fit the device at once (refused before launch), or its grid barrier waited
    past its budget (the kernel stopped every block and set its error flag). Names the
    kernel."""


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
    return per_sm, multiprocessors(device_id)


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


def multiprocessors(device_id: int) -> int:
    """The device's multiprocessor count."""
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])

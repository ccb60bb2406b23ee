"""Compile the CUDA source with NVRTC through ctypes, without a GPU or CuPy.

NVRTC is a compiler library only (no driver, no device), and PyPI ships it
(``nvidia-cuda-nvrtc-cu12`` / ``nvidia-cuda-nvrtc``), so a machine without a GPU can check that
the CUDA kernels compile: :func:`compile_ptx` is what the CPU test suite runs.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import os
import re

from .source import NVRTC_OPTIONS, cuda_source

__all__ = ["find_nvrtc", "load_nvrtc", "cache_dir", "compile_ptx", "resource_usage"]


def find_nvrtc() -> str | None:
    """Path of a libnvrtc shared library from the nvidia-cuda-nvrtc wheels, CuPy's CUDA path
    or the system, or None."""
    cands = []
    try:
        import nvidia.cuda_nvrtc as pkg

        for root in pkg.__path__:
            cands += sorted(glob.glob(os.path.join(root, "lib", "libnvrtc.so*")))
    except ImportError:
        pass
    try:  # CUDA 13's wheel layout: nvidia/cu13/lib
        import nvidia

        for root in nvidia.__path__:
            cands += sorted(glob.glob(os.path.join(root, "cu*", "lib", "libnvrtc.so*")))
    except ImportError:
        pass
    for root in (os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"):
        if root:
            cands += sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")))
    cands = [c for c in cands if "builtins" not in os.path.basename(c) and ".alt." not in c]
    return cands[0] if cands else None


def load_nvrtc(path: str) -> ctypes.CDLL:
    """NVRTC's library at ``path``, with its builtins library (``libnvrtc-builtins.so.*`` in the
    same folder) loaded first: a pip NVRTC wheel without an RPATH (13.0.88) otherwise fails at
    the first compile with "failed to open libnvrtc-builtins.so.13.0" unless LD_LIBRARY_PATH
    names its folder."""
    folder = os.path.dirname(path)
    for builtins in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so*"))):
        if ".alt." not in builtins:
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
            break
    return ctypes.CDLL(path)


def cache_dir() -> str | None:
    """Where compiled results are kept between processes: ``STEIN_CORESET_NVRTC_CACHE``
    (empty: no cache), else ``~/.cache/stein_coreset/nvrtc``."""
    env = os.environ.get("STEIN_CORESET_NVRTC_CACHE")
    if env is not None:
        return env or None
    return os.path.join(os.path.expanduser("~"), ".cache", "stein_coreset", "nvrtc")


def _compile(arch: str, source: str | None, extra: tuple = ()):
    """(PTX, NVRTC's log) of the CUDA source for ``arch``, from the cache (:func:`cache_dir`)
    when this NVRTC compiled the same source with the same options before (a compile of the
    engine's module costs ~7-10 s of CPU); RuntimeError with the log on failure."""
    path = find_nvrtc()
    if path is None:
        raise FileNotFoundError("no libnvrtc found (pip install nvidia-cuda-nvrtc-cu12)")
    src = (cuda_source() if source is None else source).encode()
    opts = [o.encode() for o in (*NVRTC_OPTIONS, f"--gpu-architecture={arch}", *extra)]
    key = hashlib.sha256(b"\0".join([os.path.realpath(path).encode(), src, *opts])).hexdigest()
    cached = None if cache_dir() is None else os.path.join(cache_dir(), key + ".json")
    if cached is not None and os.path.isfile(cached):
        try:
            with open(cached) as f:
                hit = json.load(f)
            return hit["ptx"], hit["log"]
        except (OSError, ValueError, KeyError):
            pass  # a damaged entry: compile again
    lib = load_nvrtc(path)
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"stein_coreset_kernels.cu", 0, None, None)
    if rc != 0:
        raise RuntimeError(f"nvrtcCreateProgram failed with code {rc}")
    try:
        arr = (ctypes.c_char_p * len(opts))(*opts)
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        if rc != 0:
            raise RuntimeError("NVRTC failed to compile the CUDA source:\n" + log.value.decode())
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(prog, ptx)
        out = ptx.value.decode(), log.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    if cached is not None:
        try:
            os.makedirs(os.path.dirname(cached), exist_ok=True)
            tmp = f"{cached}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump({"ptx": out[0], "log": out[1]}, f)
            os.replace(tmp, cached)
        except OSError:
            pass  # a read-only home: no cache, the same result
    return out


def compile_ptx(arch: str = "compute_90", source: str | None = None) -> str:
    """PTX of the CUDA source for ``arch``; raises RuntimeError with NVRTC's log on failure."""
    return _compile(arch, source)[0]


def resource_usage(arch: str = "sm_90", source: str | None = None) -> dict:
    """What ptxas gives each kernel for a real ``arch`` (machine code, as the driver would load
    it): ``{entry: {"registers": per thread, "smem": static shared bytes, "spill": spill-store
    bytes, "stack": stack-frame bytes (local memory: arrays the compiler could not keep in
    registers)}}``. A persistent kernel's grid barrier needs its blocks resident together, so this
    is what says, without a GPU, that one block per multiprocessor fits."""
    log = _compile(arch, source, ("--ptxas-options=-v",))[1]
    out, name = {}, None
    for line in log.splitlines():
        m = re.search(r"Function properties for (\w+)", line)
        if m:
            name = m.group(1)
            out[name] = {"registers": 0, "smem": 0, "spill": 0, "stack": 0}
            continue
        if name is None:
            continue
        m = re.search(r"(\d+) bytes stack frame", line)
        if m:
            out[name]["stack"] = int(m.group(1))
        m = re.search(r"(\d+) bytes spill stores", line)
        if m:
            out[name]["spill"] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            out[name]["registers"] = int(m.group(1))
            sm = re.search(r"(\d+) bytes smem", line)
            out[name]["smem"] = int(sm.group(1)) if sm else 0
    return out

"""The CUDA sources of the ``cuda`` backend and their compilation at run time by NVRTC.

The kernels live in ``src_cuda/`` beside this module, one file per loop (``common.cuh`` holds
what they share: the kernel entry, the argmin across a launch, the grid barrier). The scalar
math is the text the C++ is built from (``engine/shared/base_kernels.inc`` and ``radial.inc``):
:func:`cuda_source` puts the NVRTC prelude, those files and a module's files together, and
:func:`module` compiles it through ``cupy.RawModule`` once per device and :data:`~.config.CONFIG`,
so installing the package needs no CUDA toolkit and the wheel stays CPU-only. Everything is
float64.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from . import config

__all__ = ["NVRTC_OPTIONS", "nvrtc_prelude", "SHARED", "MODULES", "KNOWN_BASES", "cuda_source",
           "module", "blocks"]

_HERE = Path(__file__).resolve().parent
#: Where the .cu files are: ``src_cuda/`` beside this module.
SOURCE_DIR = _HERE / "src_cuda"
#: Where the text shared with the C++ is: ``engine/shared/``.
SHARED_DIR = _HERE.parent / "shared"

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

#: The C++ text the CUDA sources share with the C++ of ``engine/cpu``, in the order it is put
#: before each module: the base-kernel list, then the scalar math (``engine/shared/``).
SHARED = ("base_kernels.inc", "radial.inc")

#: The modules NVRTC compiles, each from its files of ``src_cuda/`` in this order: the engine's
#: kernels and loops, and the estimators' DKSD pass (a module of its own, compiled only where a
#: model is fitted).
MODULES = {
    "kernels": ("common.cuh", "products.cu", "stein_thinning.cu", "kt_split.cu", "kt_swap.cu",
                "kt_swap_ls.cu", "amd.cu", "rpcholesky.cu"),
    "dksd": ("dksd.cu",),
}


def _shared_text(name: str) -> str:
    path = SHARED_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"{name} is not installed in {SHARED_DIR}")
    return path.read_text()


def _base_kernel_codes() -> dict[str, int]:
    # the lines X(ID, code, "name", radial) of SC_BASE_KERNELS in base_kernels.inc
    text = _shared_text("base_kernels.inc")
    body = text[text.index("#define SC_BASE_KERNELS(X)"):]
    body = body[: re.search(r"[^\\]\n", body).end()]  # the macro ends at a line without '\'
    line = r'X\(\s*\w+\s*,\s*(\d+)\s*,\s*"(\w+)"\s*,\s*\w+\s*\)'
    return {name: int(code) for code, name in re.findall(line, body)}


#: Base-kernel codes the CUDA source knows, ``{name: code}``: read from base_kernels.inc, the
#: list the CUDA source includes and the C++ is built from (so they equal the C++'s,
#: ``engine.cpu.bridge.BASE_KERNEL_CODES``).
KNOWN_BASES = _base_kernel_codes()


def nvrtc_prelude() -> str:
    """The text :func:`cuda_source` puts first for NVRTC: ``int64_t`` and the CUDA spellings of
    the macros the shared C++ text uses (``SC_TARGET`` as ``__device__``, ``SC_SQRT``, ...).

    Everything after it in :func:`cuda_source` is CUDA C++ that includes no header, so another
    compiler can build that rest with its own definitions of these names (the tests' CPU
    simulator does)."""
    return _PRELUDE


@functools.cache
def cuda_source(part: str = "kernels") -> str:
    """One module's CUDA source (``part`` one of :data:`MODULES`): the NVRTC prelude
    (:func:`nvrtc_prelude`), the shared C++ text (:data:`SHARED`), then the module's files of
    ``src_cuda/`` in order."""
    if part not in MODULES:
        raise ValueError(f"part must be one of {tuple(MODULES)}, got {part!r}")
    shared = "".join(_shared_text(name) + "\n" for name in SHARED)
    files = "".join((SOURCE_DIR / name).read_text() + "\n" for name in MODULES[part])
    return nvrtc_prelude() + shared + files


_COMPILED: dict = {}


def module(device_id: int, part: str = "kernels"):
    """The compiled module ``part`` on the device, once per :data:`~.config.CONFIG`."""
    cfg = config.CONFIG
    key = (device_id, part, cfg.block, cfg.warp, cfg.compiler)
    if key not in _COMPILED:
        if cfg.compiler is not None:
            _COMPILED[key] = cfg.compiler(cuda_source(part), NVRTC_OPTIONS, device_id)
        else:
            import cupy

            with cupy.cuda.Device(device_id):
                _COMPILED[key] = cupy.RawModule(code=cuda_source(part), options=NVRTC_OPTIONS)
    return _COMPILED[key]


def blocks(n: int) -> int:
    """Blocks of :data:`~.config.CONFIG`'s size that cover ``n`` threads (at least one)."""
    return max(1, (int(n) + config.CONFIG.block - 1) // config.CONFIG.block)

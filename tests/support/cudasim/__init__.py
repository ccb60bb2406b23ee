"""Run the ``cuda`` backend's kernels on the CPU: a simulator for machines without a GPU.

:func:`fake_cupy` returns a module with the small part of CuPy that
:class:`stein_coreset.engine.cuda.kernel.CudaKernel` uses, over NumPy arrays. Its ``RawModule``
compiles the CUDA source with g++ against ``runtime.hpp`` beside this file (each CUDA thread an
OS thread, ``__syncthreads`` a barrier, ``__shared__`` memory per block, a device of ``sms``
multiprocessors holding ``blocks_per_sm`` blocks each, shared by every launch, so a grid that
fits runs all its blocks at once and the persistent kernels' grid barriers work, warps of
``warp`` lanes that meet at each shuffle), and CUDA graphs are recorded launches replayed in
order. Its ``cuda.driver`` has what the persistent launches use: the occupancy query
(``blocks_per_sm`` for a block the kernel takes, 0 otherwise) and the cooperative launch,
which refuses a grid larger than the device holds at once, as the driver does
(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE). So the kernels and the host code that drives
them — steps, state in device memory, grid barriers, graph replays, cooperative launches — run
unchanged, and the tests compare them with
the C++ loops on any machine. Blocks are small (``block`` threads) to keep the thread count low.

The library is reached through public seams only:
:func:`stein_coreset.engine.cuda.source.cuda_source` (the source, whose base-kernel list and
scalar math come from engine/shared/), :func:`stein_coreset.engine.cuda.source.nvrtc_prelude`
(the NVRTC-only text at its head, which the simulator replaces by ``runtime.hpp``) and
:data:`stein_coreset.engine.cuda.config.CONFIG` (block, warp and the compiler the host code
uses).
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RUNTIME = HERE / "runtime.hpp"

_CTYPES = {
    "long long": ctypes.c_longlong, "int": ctypes.c_int, "double": ctypes.c_double,
    "unsigned int": ctypes.c_uint, "float": ctypes.c_float,
    "unsigned long long": ctypes.c_ulonglong,
}


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in out + [cur] if p.strip()]


def rewrite_shared(src: str) -> str:
    """Each ``__shared__ T a[N], b;`` becomes references to per-block slots."""
    ids = itertools.count()

    def repl(m):
        decls = _split_top(m.group(1))
        head = re.match(r"^(.*[\s*&])(\w+)\s*((?:\[[^\]]*\])*)$", decls[0])
        if head is None:
            raise ValueError(f"cannot parse the shared declaration {m.group(0)!r}")
        typ = head.group(1).strip()
        out = []
        for k, d in enumerate(decls):
            name, dims = (head.group(2), head.group(3)) if k == 0 else re.match(
                r"^(\w+)\s*((?:\[[^\]]*\])*)$", d).groups()
            out.append(f"auto& {name} = sim::shared<{typ}{dims}>({next(ids)});")
        return " ".join(out)

    return re.sub(r"__shared__\s+([^;]+);", repl, src)


def kernel_signatures(src: str, cxx: str = "g++") -> dict[str, list[tuple[str, str]]]:
    """``{name: [(type, param), ...]}`` of the ``extern "C" __global__`` functions, after the
    preprocessor (so parameter macros are expanded)."""
    pre = subprocess.run([cxx, "-E", "-P", "-x", "c++", "-"], input=src, text=True,
                         capture_output=True, check=True).stdout
    out = {}
    for m in re.finditer(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', pre):
        params = []
        for p in _split_top(m.group(2)):
            pm = re.match(r"^(.*?)(\w+)$", p.strip())
            params.append((pm.group(1).strip(), pm.group(2)))
        out[m.group(1)] = params
    return out


class SimModule:
    """The CUDA source built for the simulator: ``get_function(name)`` as in cupy.RawModule."""

    def __init__(self, code: str, block: int, sms: int, fake, prelude: str = "", warp: int = 8,
                 max_threads: int | None = None, blocks_per_sm: int = 1,
                 barrier_s: float = 20.0):
        if prelude and code.startswith(prelude):
            code = code[len(prelude):]
        slots = sms * blocks_per_sm
        # the grid barrier's budget in clock64() units, nanoseconds here
        defines = (f"#define SC_BLOCK {block}\n#define SC_WARP {warp}\n"
                   f"#define SC_BARRIER_BUDGET {int(barrier_s * 1e9)}LL\n")
        body = defines + rewrite_shared(code)
        self.signatures = kernel_signatures(body)
        wrappers = []
        for name, params in self.signatures.items():
            call = ", ".join(f"*({t} *)a[{k}]" for k, (t, _) in enumerate(params))
            wrappers.append(
                f'extern "C" void sim_launch_{name}(unsigned gx, unsigned gy, unsigned bx, '
                f"unsigned stagger, void** a) "
                f"{{ sim::launch(gx, gy, bx, {slots}u, stagger, [&] {{ {name}({call}); }}); }}"
            )
        full = (defines + f'#include "{RUNTIME}"\n' + body + "\n" + "\n".join(wrappers) + "\n")
        key = hashlib.sha256((full + RUNTIME.read_text()).encode()).hexdigest()[:16]
        build = Path(tempfile.gettempdir()) / "stein_coreset_cudasim"
        build.mkdir(exist_ok=True)
        lib = build / f"sim_{key}.so"
        if not lib.exists():
            srcf = build / f"sim_{key}.cpp"
            srcf.write_text(full)
            tmp = build / f"sim_{key}.{id(self)}.so"
            r = subprocess.run(
                ["g++", "-std=c++17", "-O1", "-g", "-shared", "-fPIC", "-pthread",
                 "-ffp-contract=off", "-Wno-div-by-zero", "-o", str(tmp), str(srcf)],
                capture_output=True, text=True,
            )
            if r.returncode != 0:
                raise RuntimeError("the simulator build failed:\n" + r.stderr[-6000:])
            tmp.replace(lib)
        self.lib = ctypes.CDLL(str(lib))
        self.block, self.fake, self.warp = block, fake, warp
        self.sms, self.blocks_per_sm = sms, blocks_per_sm
        self.max_threads = block if max_threads is None else max_threads

    def get_function(self, name: str):
        return SimFunction(self, name)


class SimFunction:
    def __init__(self, module: SimModule, name: str):
        self.module, self.name = module, name
        self.params = module.signatures[name]
        self.fn = getattr(module.lib, f"sim_launch_{name}")
        self.fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                            ctypes.c_void_p]
        self.fn.restype = None
        # the driver's limit for this kernel: a launch may use any whole number of warps from
        # the module's block up to it (the kernels that size shared memory by SC_BLOCK are
        # only ever launched with BLOCK)
        self.max_threads_per_block = module.max_threads
        # the driver's handle (cupy.RawKernel.kernel.ptr), through which the fake driver finds
        # the function
        self.kernel = types.SimpleNamespace(ptr=module.fake._register(self))

    def __call__(self, grid, block, args):
        stream = self.module.fake._current_stream()
        if stream is not None and stream._capture is not None:
            stream._capture.append((self, grid, block, tuple(args)))
            return
        self.run(grid, block, args)

    def check_block(self, block):
        m = self.module
        b = int(block[0])
        if len(block) != 1 or not (b == m.block or (m.block <= b <= m.max_threads
                                                     and b % m.warp == 0)):
            raise ValueError(f"{self.name}: block {block}, the simulator runs {m.block} "
                             f"(or whole warps up to {m.max_threads})")

    def run(self, grid, block, args):
        grid = tuple(int(g) for g in grid) + (1, 1)
        self.check_block(block)
        self.module.fake.launch_log.append((self.name, grid[0], int(block[0])))
        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} arguments, got {len(args)}")
        keep = []
        for (typ, pname), a in zip(self.params, args, strict=True):
            if "*" in typ:
                if not isinstance(a, np.ndarray):
                    raise TypeError(f"{self.name}: {pname} needs an array, got {type(a)}")
                if not a.flags.c_contiguous:
                    raise ValueError(f"{self.name}: {pname} is not contiguous")
                keep.append(ctypes.c_void_p(a.ctypes.data))
            else:
                base = re.sub(r"\bconst\b", "", typ).strip()
                keep.append(_CTYPES[base](a.item() if isinstance(a, np.generic) else a))
        argv = (ctypes.c_void_p * max(1, len(keep)))(*[ctypes.addressof(k) for k in keep])
        self.fn(grid[0], grid[1], int(block[0]), 0, argv)


class FakeArray(np.ndarray):
    """A NumPy array that answers ``.device.id``, ``.data.ptr`` and ``.set`` as a CuPy array
    does (its device pointer is its host address)."""

    @property
    def device(self):
        return types.SimpleNamespace(id=0)

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)

    def set(self, host):
        self[...] = host


class CUDADriverError(RuntimeError):
    """The stand-in of ``cupy.cuda.driver.CUDADriverError``."""


def fake_cupy(block: int = 16, sms: int = 3, prelude: str = "",
              warp: int = 8, max_threads: int | None = None, blocks_per_sm: int = 1,
              barrier_s: float = 20.0) -> types.ModuleType:
    """A ``cupy`` stand-in over NumPy whose RawModule runs on the simulator (a device of
    ``sms`` multiprocessors of ``blocks_per_sm`` blocks; ``barrier_s`` the grid barrier's
    budget in seconds)."""
    cp = types.ModuleType("cupy")
    cp.__path__ = []
    streams: list = []
    functions: dict = {}

    def register(fn):
        functions[len(functions) + 1] = fn
        return len(functions)

    cp._register = register
    #: (kernel, blocks, threads per block) of every launch, plain or cooperative, in order
    cp.launch_log = []

    def view(a):
        return np.asarray(a).view(FakeArray)

    def empty(shape, dtype=np.float64):
        out = np.empty(shape, dtype=dtype)
        # garbage, as device memory is: NaN or a large negative number
        out.fill(np.nan if out.dtype.kind == "f" else (-7777 if out.dtype.kind == "i" else 7777))
        return view(out)

    cp.ndarray = FakeArray
    cp.float64, cp.float32, cp.int64, cp.uint32 = np.float64, np.float32, np.int64, np.uint32
    cp.empty = empty
    cp.zeros = lambda shape, dtype=np.float64: view(np.zeros(shape, dtype=dtype))
    cp.full = lambda shape, v, dtype=None: view(np.full(shape, v, dtype=dtype))
    cp.asarray = lambda a, dtype=None: view(np.array(a, dtype=dtype, copy=True))
    cp.ascontiguousarray = lambda a, dtype=None: view(np.ascontiguousarray(a, dtype=dtype))
    cp.asnumpy = lambda a: np.array(a, copy=True).view(np.ndarray)
    cp.isfinite = lambda a: view(np.isfinite(np.asarray(a)))
    cp.get_default_memory_pool = lambda: types.SimpleNamespace(free_bytes=lambda: 0)

    class Device:
        def __init__(self, i=0):
            self.id = i
            self.attributes = {"MultiProcessorCount": sms}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            pass

    class Graph:
        def __init__(self, launches):
            self.launches = launches

        def launch(self, stream=None):
            for fn, grid, blk, args in self.launches:
                fn.run(grid, blk, args)

    class Stream:
        ptr = 0

        def __init__(self, non_blocking=False):
            self._capture = None

        def __enter__(self):
            streams.append(self)
            return self

        def __exit__(self, *exc):
            streams.pop()
            return False

        def synchronize(self):
            pass

        def begin_capture(self):
            self._capture = []

        def end_capture(self):
            g, self._capture = Graph(self._capture), None
            return g

    def occupancy(ptr, threads, smem):
        """Blocks of ``threads`` threads one multiprocessor holds: blocks_per_sm for a block the
        kernel takes, else 0 (cuOccupancyMaxActiveBlocksPerMultiprocessor)."""
        fn = functions[ptr]
        ok = fn.module.block <= int(threads) <= fn.module.max_threads
        return fn.module.blocks_per_sm if ok and smem == 0 else 0

    def launch_cooperative(ptr, gx, gy, gz, bx, by, bz, smem, stream, params):
        """cuLaunchCooperativeKernel: the grid must fit the device at once, then the kernel
        runs on the driver's ``void**`` parameters, as the simulator's launches do."""
        fn = functions[ptr]
        fn.check_block((bx,))
        m = fn.module
        if (by, bz, gz) != (1, 1, 1) or smem != 0:
            raise CUDADriverError("CUDA_ERROR_INVALID_VALUE: the simulator launches 1-D grids "
                                  "without dynamic shared memory")
        if gx * gy > m.blocks_per_sm * m.sms:
            raise CUDADriverError("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: too many blocks in "
                                  "cooperative launch")
        cp.launch_log.append((fn.name, int(gx), int(bx)))
        fn.fn(int(gx), int(gy), int(bx), 2000, ctypes.c_void_p(params))  # 2 ms a team

    cp._current_stream = lambda: streams[-1] if streams else None
    cp.cuda = types.SimpleNamespace(
        Device=Device, Stream=Stream,
        runtime=types.SimpleNamespace(getDeviceCount=lambda: 1,
                                      memGetInfo=lambda: (8 << 30, 16 << 30)),
        driver=types.SimpleNamespace(
            occupancyMaxActiveBlocksPerMultiprocessor=occupancy,
            launchCooperativeKernel=launch_cooperative, CUDADriverError=CUDADriverError),
    )
    cp.RawModule = lambda code, options=(): SimModule(code, block, sms, cp, prelude, warp,
                                                      max_threads, blocks_per_sm, barrier_s)
    return cp


def install(monkeypatch, block: int = 16, sms: int = 3, warp: int = 8,
            max_threads: int | None = None, blocks_per_sm: int = 1, barrier_s: float = 20.0,
            edit=None):
    """Put the fake CuPy in ``sys.modules`` and point :mod:`stein_coreset.engine.cuda` at the
    simulator through :data:`stein_coreset.engine.cuda.config.CONFIG` (its compiler, block and
    warp size;
    ``max_threads`` the kernels' ``max_threads_per_block``, default ``block``;
    ``blocks_per_sm`` what the occupancy query answers; ``barrier_s`` the grid barrier's
    budget; ``edit``, if given, rewrites each module's source first, for tests that check a
    broken kernel is caught); returns the fake module."""
    from stein_coreset.engine.cuda import config as cuda_config
    from stein_coreset.engine.cuda import source as cuda_src

    cp = fake_cupy(block, sms, cuda_src.nvrtc_prelude(), warp, max_threads, blocks_per_sm,
                   barrier_s)
    monkeypatch.setitem(sys.modules, "cupy", cp)

    def compiler(source, options, device_id):
        return cp.RawModule(code=source if edit is None else edit(source), options=options)

    monkeypatch.setattr(cuda_config.CONFIG, "block", block)
    monkeypatch.setattr(cuda_config.CONFIG, "warp", warp)
    monkeypatch.setattr(cuda_config.CONFIG, "compiler", compiler)
    return cp

"""Debiased compression of inputs that do not fit one process, on Dask.

Scheme (docs/distributed.md): *map* -- every row block of (X, S) is compressed by a debiased
method of :func:`stein_coreset.compress` to an intermediate coreset targeting P; *reduce* -- the
block coresets are merged (groups of ``fan_in``, as a tree) and the union is compressed again by
the same debiased method, whose first stage (Stein thinning / Low-rank Debiasing weights) re-weights
the union towards P, so a block of pure burn-in gets little weight. The Stein kernel is fixed once
(IMQ, median bandwidth of a small sample of the input) and used in every block and every reduce.
Per-task seeds come from ``numpy.random.SeedSequence(seed)``, so the result does not depend on the
number of workers, their order or retries. Only block coresets travel to the driver.

Needs the optional extra ``dask`` (``dask[array]``, ``distributed``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import warnings
import zipfile

import array_api_compat
import numpy as np

from . import _io
from . import _validation as val
from ._array_api import to_host
from ._progress import DELAY_S, stage
from ._progress import resolve as resolve_progress
from ._threads import cancel_loops_briefly, cancel_running, effective_n_threads
from .compress import Coreset as _Coreset
from .compress import compress as _sc_compress
from .compress import equal_draw_counts
from .diagnostics import DiagnosticWarning
from .kernels import SteinKernel
from .methods import METHODS

__all__ = ["compress", "run_cli"]

#: Debiased methods usable in the map and the reduce (they need the scores S).
DEBIASED = tuple(name for name, spec in METHODS.items() if spec.debiased)
POINT_KEYS, SCORE_KEYS = _io.POINT_KEYS, _io.SCORE_KEYS
#: What a missing Dask says (the CLI prints it as is).
NEEDS_DASK = (
    "the distributed path (stein_coreset.distributed; several chain files, --workers, "
    "--scheduler or --block-size on the command line) needs the optional extra 'dask': "
    "pip install 'stein_coreset[dask]'"
)


def _compute(dask, *args, **kw):
    """``dask.compute`` whose Ctrl-C also stops the C++ loops still running on the threaded
    scheduler's worker threads (they would otherwise run to the end, holding the exit) and on
    the workers of a ``distributed`` client (Dask releases the graph's queued tasks; the running
    ones would otherwise hold the workers, and the next call, for a block's time)."""
    try:
        return dask.compute(*args, **kw)
    except KeyboardInterrupt:
        cancel_running()
        if kw.get("scheduler") is None:  # the default scheduler: a distributed client if any
            _cancel_on_workers()
        raise


#: Seconds the driver waits, after a Ctrl-C, for the workers to stop their loops.
CANCEL_WAIT_S = 1.0


def _cancel_on_workers() -> None:
    """Stop the library's loops on the workers of the current ``distributed`` client, if any,
    waiting at most :data:`CANCEL_WAIT_S` (after a terminal's Ctrl-C the workers may be gone
    too: nothing to stop there)."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return
    import threading

    def run():
        try:
            client.run(cancel_loops_briefly)
        except Exception:  # noqa: BLE001 - workers shutting down: nothing left to stop
            pass

    t = threading.Thread(target=run, name="stein_coreset-cancel", daemon=True)
    t.start()
    t.join(CANCEL_WAIT_S)


def _import_dask():
    try:
        import dask
        import dask.array as da
    except ImportError as e:
        raise ImportError(f"{NEEDS_DASK} ({e})") from e
    return dask, da


def _import_distributed():
    try:
        import distributed
    except ImportError as e:
        raise ImportError(f"{NEEDS_DASK} ({e})") from e
    return distributed


# ---------------------------------------------------------------------------------------------
# Lazy inputs
# ---------------------------------------------------------------------------------------------
def _shape_2d(shape):
    return (shape[0], 1) if len(shape) == 1 else tuple(shape)


def _lazy_file(spec: str, keys, name: str, only_array: bool = True):
    """A dask array (one chunk) reading ``spec`` (``.npy`` or ``file.npz[:key]``, the array
    chosen by :func:`stein_coreset._io.npz_member`) on a worker; only the header is read here
    (a memory map in the graph would be pickled, whole, through the scheduler)."""
    dask, da = _import_dask()
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
    _check_real_dtype(dtype, what)
    return da.from_delayed(dask.delayed(_io.read_array_2d)(path, key), _shape_2d(shape),
                           dtype=np.float64)


def _same_files(X, S) -> bool:
    """Whether X and S name the same files (the points-and-scores ``.npz`` of each chain)."""
    def names(A):
        if isinstance(A, (str, os.PathLike)):
            return [os.fspath(A)]
        if isinstance(A, (list, tuple)) and all(isinstance(a, (str, os.PathLike)) for a in A):
            return [os.fspath(a) for a in A]
        return None

    nx = names(X)
    return nx is not None and nx == names(S)


def _check_real_dtype(dtype, what: str) -> None:
    """Real numbers only: a complex input used to lose its imaginary part on the workers (the
    warning only in a worker log)."""
    if np.dtype(dtype).kind not in "fiub":
        raise TypeError(f"{what} must hold real numbers, got dtype {np.dtype(dtype)}")


def _as_dask(A, name: str, keys, only_array: bool = True):
    """X or S as a dask array chunked along rows only (``only_array``: see :func:`_lazy_file`)."""
    dask, da = _import_dask()
    if isinstance(A, da.Array):
        out = A
    elif isinstance(A, (str, os.PathLike)):
        out = _lazy_file(os.fspath(A), keys, name, only_array)
    elif isinstance(A, (list, tuple)):
        if len(A) == 0:
            raise ValueError(f"{name}: the list of chains is empty")
        parts = []
        for i, a in enumerate(A):
            if isinstance(a, (str, os.PathLike)):
                p = _lazy_file(os.fspath(a), keys, f"{name}[{i}]", only_array)
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
            parts.append(p)
        out = da.concatenate(parts, axis=0)
    else:
        raise TypeError(
            f"{name}: expected a dask.array, a list of per-chain arrays or paths, "
            f"got {type(A).__name__} (wrap a NumPy array with dask.array.from_array)"
        )
    if out.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D (n, d) array, got shape {out.shape}")
    _check_real_dtype(out.dtype, name)
    if any(math.isnan(c) for c in out.chunks[0]):
        raise ValueError(f"{name}: unknown chunk sizes; call compute_chunk_sizes() first")
    if len(out.chunks[1]) != 1:
        out = out.rechunk({1: -1})
    return out


# ---------------------------------------------------------------------------------------------
# Tasks (run on workers)
# ---------------------------------------------------------------------------------------------
def _block_arrays(Xb, Sb):
    """A block as float64 in its own namespace: NumPy blocks as NumPy, CuPy blocks stay on
    their GPU (the compression of the block runs there)."""
    if array_api_compat.is_numpy_array(Xb) and array_api_compat.is_numpy_array(Sb):
        return np, np.asarray(Xb, dtype=np.float64), np.asarray(Sb, dtype=np.float64)
    xp = array_api_compat.array_namespace(Xb, Sb)
    return xp, xp.astype(Xb, xp.float64), xp.astype(Sb, xp.float64)


def _sample_task(Xb, Sb, local):
    """Rows ``local`` of a block, on the host (the sample fixing the kernel bandwidth)."""
    xp, Xb, Sb = _block_arrays(Xb, Sb)
    idx = xp.asarray(local, device=array_api_compat.device(Xb))
    return to_host(xp.take(Xb, idx, axis=0)), to_host(xp.take(Sb, idx, axis=0))


class TaskCancelled(RuntimeError):
    """A task's loops were stopped because the driver was interrupted (Ctrl-C)."""


def _task_compress(*args, **kw):
    """``compress`` inside a task, without its input diagnostics' warnings: a block may hold
    only burn-in and a reduce node only debiased points, so Stein's identity judged there
    says nothing of the user's input (and a warning from a worker reaches no one). Loops
    stopped for the driver's Ctrl-C end the task with :class:`TaskCancelled`, an ordinary
    error, not the KeyboardInterrupt they raise in a user's thread: a Dask worker treats the
    latter as its own interruption."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiagnosticWarning)
        try:
            return _sc_compress(*args, **kw)
        except KeyboardInterrupt:
            if threading.current_thread() is threading.main_thread():
                raise  # the synchronous scheduler: the user's own Ctrl-C
            raise TaskCancelled("stopped: the driver was interrupted") from None


def _block_task(Xb, Sb, offset, size, method, kernel, seed, nan_policy, options, delay_s):
    """Map: compress one block; return (global indices, weights, points, scores, info).

    The block is compressed in its own namespace (NumPy, or CuPy on the worker's GPU); only the
    block coreset (``size`` rows) comes back to the host."""
    if delay_s:
        time.sleep(delay_s)
    xp, Xb, Sb = _block_arrays(Xb, Sb)
    n = Xb.shape[0]
    if nan_policy == "omit" and not bool(xp.any(xp.all(xp.isfinite(Xb), axis=1)
                                                & xp.all(xp.isfinite(Sb), axis=1))):
        # a block of NaN rows only: it carries no mass, like its rows in the single-process path
        return _empty_part(Xb.shape[1], {"n": n, "offset": offset, "size": 0, "ksd": None,
                                         "n_dropped": n, "time_s": 0.0})
    n_ok = n
    if nan_policy == "omit":
        ok = to_host(xp.all(xp.isfinite(Xb), axis=1) & xp.all(xp.isfinite(Sb), axis=1),
                     dtype=np.bool_)
        n_ok = int(ok.sum())
        if n_ok < min(size, n):
            # fewer rows left than the block coreset holds (compress would refuse the size):
            # they go to the reduce as they are, equally weighted, merged with the others
            loc = np.flatnonzero(ok).astype(np.int64)
            idx = xp.asarray(loc, device=array_api_compat.device(Xb))
            return {
                "indices": loc + offset,
                "weights": np.full(loc.size, 1.0 / loc.size),
                "points": to_host(xp.take(Xb, idx, axis=0)),
                "scores": to_host(xp.take(Sb, idx, axis=0)),
                "mass": float(n_ok),
                "info": {"n": n, "offset": offset, "size": int(loc.size), "ksd": None,
                         "n_dropped": n - n_ok, "time_s": 0.0, "passed_through": True},
            }
    opts = _fit_options(options, n_ok)
    res = _task_compress(
        Xb, Sb, size=min(size, n_ok), method=method, kernel=kernel,
        seed=np.random.default_rng(seed), nan_policy=nan_policy, **opts,
    )
    loc = to_host(res.indices, dtype=np.int64)
    return {
        "indices": loc + offset,
        "weights": to_host(res.weights),
        "points": to_host(res.points),
        "scores": to_host(xp.take(Sb, res.indices, axis=0)),
        "mass": float(n - res.info.get("n_dropped", 0)),
        "info": {"n": n, "offset": offset, "size": int(loc.size), "ksd": res.ksd,
                 "n_dropped": int(res.info.get("n_dropped", 0)),
                 "time_s": res.info.get("time_s")},
    }


def _empty_part(d, info):
    return {"indices": np.zeros(0, dtype=np.int64), "weights": np.zeros(0),
            "points": np.zeros((0, d)), "scores": np.zeros((0, d)), "mass": 0.0, "info": info}


def _fit_options(options, n):
    opts = dict(options)
    if opts.get("rank") is not None:
        opts["rank"] = min(int(opts["rank"]), n)
    return opts


def _reduce_task(parts, size, method, kernel, seed, options, final):
    """Reduce: merge block coresets and compress the union again, targeting P."""
    X = np.concatenate([p["points"] for p in parts])
    S = np.concatenate([p["scores"] for p in parts])
    gidx = np.concatenate([p["indices"] for p in parts])
    mass = np.concatenate([p["weights"] * p["mass"] for p in parts])
    total = float(sum(p["mass"] for p in parts))
    n = X.shape[0]
    blocks = [b for p in parts for b in p.get("blocks", [p["info"]])]
    if n == 0:  # every block below this node was NaN rows only (nan_policy="omit")
        if final:
            raise ValueError("every row of X or S has NaN or inf")
        part = _empty_part(X.shape[1], {"n_union": 0, "size": 0, "ksd": None, "time_s": 0.0,
                                        "input_mass_kept": 0.0})
        part.update(blocks=blocks, reduce=[r for p in parts for r in p.get("reduce", [])])
        return part
    opts = _fit_options(options, n)
    res = _task_compress(
        X, S, size=min(size, n), method=method, kernel=kernel,
        seed=np.random.default_rng(seed), **opts,
    )
    loc = np.asarray(res.indices, dtype=np.int64)
    info = {"n_union": n, "size": int(loc.size), "ksd": res.ksd,
            "time_s": res.info.get("time_s"),
            # Share of the merged input (block mass x block-coreset weight) the reduce kept.
            "input_mass_kept": float(mass[loc].sum() / max(total, 1e-300))}
    return {
        "indices": gidx[loc],
        "weights": np.asarray(res.weights, dtype=np.float64),
        "points": X[loc],
        "scores": S[loc],
        "mass": total,
        "info": info,
        "kind": res.kind,
        "ksd": res.ksd,
        "blocks": blocks,
        "reduce": [r for p in parts for r in p.get("reduce", [])] + [info],
    }


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------
def compress(
    X,
    S,
    *,
    size: int,
    method: str,
    seed=None,
    kernel=None,
    block_size: int | None = None,
    fan_in: int = 8,
    nan_policy: str = "raise",
    n_threads: int = 1,
    scheduler=None,
    progress: bool | None = None,
    _delay_s: float = 0.0,
    **options,
):
    """Debiased compression of a row-chunked (X, S) on Dask: map over blocks, tree reduce.

    Map: each row block is compressed by ``method`` to ``block_size`` points targeting P.
    Reduce: block coresets are merged ``fan_in`` at a time and compressed again by the same
    method, as a tree, until one coreset of ``size`` points is left; the method's debiasing
    stage re-weights each union towards P, so a block of pure burn-in gets little weight
    (docs/distributed.md). The result does not depend on the number of workers or their order.

    Parameters
    ----------
    X, S : dask.array or list
        The points and their scores: ``(n, d)`` dask arrays chunked alike along rows (one block
        per row chunk), or lists of per-chain arrays / ``.npy`` / ``.npz`` paths (one block
        per chain, loaded lazily on the workers).
    size : int
        Final coreset size.
    method : str
        A debiased method of :func:`stein_coreset.compress`: st, skt, lskt, sr, sc, lsr, lsc.
    seed : int, optional
        Root of ``SeedSequence(seed)``; block b uses child b, reduce node j child n_blocks + j,
        so the same seed gives the same coreset on any scheduler.
    kernel : SteinKernel, optional
        Default: ``SteinKernel(IMQ(sigma=median_bandwidth(sample)))`` with the sample of at most
        1000 rows spread over the blocks, fixed once and used in every task; a ``SteinKernel``
        without a base (``SteinKernel(M=M)``) gets its bandwidth fixed the same way (M-distance).
    block_size : int, optional
        Size of each block coreset and of each intermediate reduce (default ``size``).
    fan_in : int
        Block coresets merged per reduce node (>= 2); more blocks give a tree.
    nan_policy : {"raise", "omit"}
        "omit" drops non-finite rows inside each block; indices stay global.
    n_threads : int
        Size of the engine's thread team inside each task (default 1: one core per Dask
        thread); the result does not depend on it.
    scheduler : optional
        Passed to ``dask.compute`` (default: the active scheduler, a ``distributed.Client`` if
        one exists).
    progress : bool or None
        A line on stderr when the graph starts and when it ends, and on the local (threaded,
        process or synchronous) schedulers Dask's bar over its tasks. Default ``None``: on when
        stderr is a terminal. The tasks themselves run silent.
    **options
        Passed to every ``sc.compress`` call (e.g. ``tau``, ``rank``).

    Returns
    -------
    Coreset
        As :func:`stein_coreset.compress` gives it, with ``indices`` into the global row order
        and ``info["blocks"]``, ``info["reduce"]`` (per-stage details), ``info["n_blocks"]``.

    Notes
    -----
    Cost: one block's compression per map task (e.g. SKT on n_b rows), one compression of at
    most ``fan_in * block_size`` rows per reduce node; only block coresets travel to the
    driver.

    See Also
    --------
    stein_coreset.compress : the same methods in one process.
    run_cli : the command line's entry, reading chain files.

    Examples
    --------
    On Dask's synchronous scheduler (with a ``distributed.Client`` open, leave out
    ``scheduler`` and the call runs on its cluster; the result is the same):

    >>> import numpy as np, dask.array as da
    >>> from stein_coreset import distributed as scd
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((1024, 2))   # biased for N(0, I)
    >>> Xd, Sd = da.from_array(X, chunks=(256, 2)), da.from_array(-X, chunks=(256, 2))
    >>> res = scd.compress(Xd, Sd, size=16, method="skt", seed=0, scheduler="sync")
    >>> res.info["n_blocks"], res.kind, res.draw_indices.size
    (4, 'equal', 16)
    >>> res.indices[:5]                     # rows of the whole X, from every block
    array([  6, 322, 464, 496, 564])
    >>> again = scd.compress(Xd, Sd, size=16, method="skt", seed=0, scheduler="threads")
    >>> bool(np.array_equal(again.indices, res.indices))
    True
    """
    dask, da = _import_dask()
    if not isinstance(method, str) or method not in DEBIASED:
        raise ValueError(f"method {method!r}: the distributed path takes the debiased methods "
                         f"{', '.join(DEBIASED)}")
    if nan_policy not in ("raise", "omit"):
        raise ValueError(f"nan_policy must be 'raise' or 'omit', got {nan_policy!r}")
    size = val.check_int(size, "size")
    fan_in = val.check_int(fan_in, "fan_in", lo=2)
    if seed is not None:  # the root of SeedSequence: a non-negative integer, as compress takes
        seed = val.check_int(seed, "seed", lo=0)
    if block_size is not None:
        block_size = val.check_int(block_size, "block_size", lo=1)  # 2.5 and True used to pass
    n_threads = effective_n_threads(n_threads)
    progress = resolve_progress(progress)
    Xd = _as_dask(X, "X", POINT_KEYS)
    # scores read from the points' own files must be named: the only array is the points
    Sd = _as_dask(S, "S", SCORE_KEYS, only_array=not _same_files(X, S))
    if Xd.shape != Sd.shape:
        raise ValueError(f"X and S must have the same shape, got {Xd.shape} and {Sd.shape}")
    if Xd.chunks[0] != Sd.chunks[0]:
        raise ValueError(
            "X and S must be chunked alike along rows, got row chunks "
            f"{Xd.chunks[0]} and {Sd.chunks[0]} (rechunk S like X: S.rechunk(X.chunks))"
        )
    rows = Xd.chunks[0]
    if any(c == 0 for c in rows):
        raise ValueError(f"X: block {rows.index(0)} is empty (row chunks {rows})")
    n = int(Xd.shape[0])
    if not 1 <= int(size) <= n:
        raise ValueError(f"size must lie in [1, n = {n}], got {size}")
    block_size = size if block_size is None else block_size
    n_blocks = len(rows)
    offsets = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)

    t0 = time.perf_counter()
    Xblocks = Xd.to_delayed().ravel()
    Sblocks = Sd.to_delayed().ravel()
    d = int(Xd.shape[1])
    if kernel is not None and not isinstance(kernel, SteinKernel):
        raise TypeError(f"kernel must be a SteinKernel, got {type(kernel).__name__}")
    M = "scale" if kernel is None else kernel.M  # None: compress's scale-free default
    if M is not None and not isinstance(M, str) and tuple(getattr(M, "shape", ())) != (d, d):
        raise ValueError(f"kernel: the preconditioner M must be ({d}, {d}) for d = {d}, got "
                         f"shape {getattr(M, 'shape', None)}")
    if kernel is None or not kernel.resolved:
        # one kernel for every task: the median bandwidth (and for M = "scale" the coordinate
        # variances) of <= 1000 rows spread over the blocks
        per = max(1, -(-1000 // n_blocks))
        sample = dask.delayed(_sample_task, pure=True)
        got = _compute(dask, *[sample(Xblocks[b], Sblocks[b],
                                    np.linspace(0, r - 1, min(per, r)).astype(np.int64))
                             for b, r in enumerate(rows)], scheduler=scheduler)
        sX = np.concatenate([g[0] for g in got])
        sS = np.concatenate([g[1] for g in got])
        ok = np.isfinite(sX).all(axis=1) & np.isfinite(sS).all(axis=1)
        if not ok.all() and nan_policy == "raise":
            raise ValueError("X or S has NaN or inf rows; pass nan_policy='omit' to drop them")
        if not ok.any():
            raise ValueError(
                f"X, S: all {ok.size} rows sampled for the kernel bandwidth have NaN or inf; "
                "pass kernel=SteinKernel(IMQ(sigma=...))"
            )
        base = None if kernel is None else kernel.base
        kernel = SteinKernel(base, M=M).resolve(np.asarray(sX[ok], dtype=np.float64))
    base = getattr(kernel, "base", None)

    ss = np.random.SeedSequence(seed)
    n_nodes = _count_reduce_nodes(n_blocks, fan_in)
    children = ss.spawn(n_blocks + n_nodes)
    seeds = [int(c.generate_state(1, np.uint64)[0]) for c in children]

    # one bar per task would interleave on the driver's terminal: the tasks run silent
    opts = dict(options, n_threads=n_threads, progress=False)
    # Task keys name every input of this call: Dask hands out a key's result if the cluster
    # still holds it, so two calls on one cluster (st then skt with one seed, say) must share a
    # key only when they compute the same thing. Named by seed and index alone, a second call
    # could silently return the first one's coreset. Still deterministic: a killed worker's
    # task is recomputed under its key.
    from dask.base import tokenize

    token = tokenize(Xd.name, Sd.name, method, size, block_size, fan_in, kernel, seed,
                     nan_policy, opts, _delay_s)
    task_b = dask.delayed(_block_task, pure=True)
    task_r = dask.delayed(_reduce_task, pure=True)
    level = [
        task_b(Xblocks[b], Sblocks[b], int(offsets[b]), block_size, method, kernel, seeds[b],
               nan_policy, opts, _delay_s, dask_key_name=f"sc-block-{b}-{token}")
        for b in range(n_blocks)
    ]
    node = 0
    while True:
        final = len(level) <= fan_in
        nxt = []
        for g in range(0, len(level), fan_in):
            s = seeds[n_blocks + node]
            nxt.append(task_r(level[g:g + fan_in], size if final else block_size, method,
                              kernel, s, opts, final, dask_key_name=f"sc-reduce-{node}-{token}"))
            node += 1
        level = nxt
        if final:
            break
    if progress:
        stage(f"stein_coreset.distributed: {method} on n = {n} rows in {n_blocks} blocks "
              f"(fan-in {fan_in}, {n_nodes} reduce nodes) ...")
        from dask.diagnostics import ProgressBar

        with ProgressBar(minimum=DELAY_S, out=sys.stderr):
            (out,) = _compute(dask, level[0], scheduler=scheduler)
        stage(f"stein_coreset.distributed: {method} done in {time.perf_counter() - t0:.1f} s")
    else:
        (out,) = _compute(dask, level[0], scheduler=scheduler)

    blocks, reduce_info = list(out["blocks"]), list(out["reduce"])
    blocks.sort(key=lambda c: c["offset"])
    info = {
        "distributed": True,
        "n": n,
        "n_blocks": n_blocks,
        "fan_in": fan_in,
        "block_size": block_size,
        "n_dropped": int(sum(b["n_dropped"] for b in blocks)),
        "blocks": blocks,
        "reduce": reduce_info,
        "sigma": getattr(base, "sigma", None),
        "time_s": time.perf_counter() - t0,
    }
    draw_indices = draws = None
    if out["kind"] == "equal":  # the sample view, repeats kept (as compress gives it)
        counts = equal_draw_counts(
            np.asarray(out["weights"]), min(int(size), n), method, search=True
        )
        draw_indices = np.repeat(np.asarray(out["indices"]), counts)
        draws = np.repeat(np.asarray(out["points"]), counts, axis=0)
    return _Coreset(
        out["indices"], out["weights"], out["points"], out["kind"], method, out["ksd"], info,
        draw_indices, draws,
    )


def _count_reduce_nodes(n_blocks: int, fan_in: int) -> int:
    count, k = 0, n_blocks
    while True:
        k = -(-k // fan_in)
        count += k
        if k == 1:
            return count


def _local_cluster(workers: int):
    """A loopback ``LocalCluster`` of ``workers`` single-threaded worker processes (no dashboard
    on a fixed port: several clusters on one machine do not collide)."""
    distributed = _import_distributed()
    return distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )


def run_cli(
    paths,
    *,
    size: int,
    method: str,
    seed: int | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    out: str | None = None,
    scores=None,
    **kw,
) -> _Coreset:
    """What ``stein-coreset compress --workers N`` (or ``--scheduler``) does with chain files.

    Reads one block per chain file, runs :func:`compress` on a local cluster, a running
    scheduler or Dask's threaded scheduler, and optionally writes the coreset to a file.

    Parameters
    ----------
    paths : str or list of str
        Chain files, one block per chain, read lazily on the workers: ``.npz`` holding points
        and scores (``X``/``S`` or the other names of ``stein-coreset compress``), ``FILE.npz:NAME``
        for one array, or ``.npy`` points with ``scores`` the score files in the same order.
    size, method, seed
        As in :func:`compress`.
    workers : int, optional
        Start a loopback ``LocalCluster`` with this many single-threaded worker processes for
        this call, closed afterwards.
    scheduler : str, optional
        Address of a running ``dask.distributed`` scheduler (``tcp://host:8786``) to connect to.
        With neither ``workers`` nor ``scheduler``: Dask's local threaded scheduler.
    out : str, optional
        Write ``indices``, ``weights``, ``points``, ``method``, ``kind``, ``ksd`` and ``info``
        (JSON, without the per-stage lists) to this ``.npz``, atomically.
    scores : list of str, optional
        Score files, one per entry of ``paths`` (default: the scores inside each ``.npz``).
    **kw
        Passed to :func:`compress` (``block_size``, ``fan_in``, ``kernel``, ``nan_policy``,
        ``tau``, ``rank`` ...).

    Returns
    -------
    Coreset
        As :func:`compress`; ``info["workers"]`` is the number of workers used (None for the
        threaded scheduler).

    Notes
    -----
    Cost as in :func:`compress`, plus starting the cluster when ``workers`` is given (a few
    seconds for the worker processes).

    See Also
    --------
    compress : the same on dask arrays or arrays in memory.
    stein_coreset.compress : one process, one array.

    Examples
    --------
    Three chain files of points and scores, on the threaded scheduler:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from stein_coreset.distributed import run_cli
    >>> rng = np.random.default_rng(1)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     paths = []
    ...     for c in range(3):
    ...         Xc = 0.5 + rng.standard_normal((300, 2))
    ...         paths.append(os.path.join(tmp, f"chain{c}.npz"))
    ...         np.savez(paths[-1], X=Xc, S=-Xc)
    ...     res = run_cli(paths, size=16, method="st", seed=0,
    ...                   out=os.path.join(tmp, "coreset.npz"))
    ...     saved = sorted(np.load(os.path.join(tmp, "coreset.npz")).files)
    >>> res.info["n_blocks"], res.info["workers"], round(float(res.weights.sum()), 4)
    (3, None, 1.0)
    >>> saved
    ['draw_indices', 'draws', 'indices', 'info', 'kind', 'ksd', 'method', 'points', 'weights']
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("paths: no chain files given")
    if workers is not None and scheduler is not None:
        raise ValueError("give workers (--workers) or scheduler (--scheduler), not both")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1
    ):
        raise ValueError(f"workers (--workers) must be an integer >= 1, got {workers!r}")
    if scores is None:
        plain = [p for p in paths if _io.split_key(p)[1] is not None
                 or not p.lower().endswith(".npz")]
        if plain:
            raise ValueError(
                f"scores: {plain[0]} is not an .npz holding points and scores; give the score "
                "files (scores=[...], --scores on the command line), one per chain"
            )
        Sp = paths
    else:
        Sp = [os.fspath(p) for p in ([scores] if isinstance(scores, (str, os.PathLike))
                                     else scores)]
        if len(Sp) != len(paths):
            raise ValueError(f"scores: {len(Sp)} score files for {len(paths)} chain files")
    _import_dask()
    client = cluster = None
    try:
        if workers is not None:
            distributed = _import_distributed()
            cluster = _local_cluster(int(workers))
            client = distributed.Client(cluster)
        elif scheduler is not None:
            distributed = _import_distributed()
            client = distributed.Client(scheduler)
        n_workers = None if client is None else len(client.scheduler_info()["workers"])
        res = compress(paths, Sp, size=size, method=method, seed=seed, **kw)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    res.info["workers"] = n_workers
    if out is not None:
        summary = {k: v for k, v in res.info.items() if k not in ("blocks", "reduce")}
        _io.write_coreset(_io.savez_path(out), res, json.dumps(summary, default=_json_default))
    return res


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return repr(o)

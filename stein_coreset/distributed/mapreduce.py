"""The driver of the map-reduce (:func:`compress`): the graph of block and reduce tasks, their
seeds, and the result's global indices."""

from __future__ import annotations

import sys
import time

import numpy as np

from .. import _io
from .. import _validation as val
from .._progress import DELAY_S, stage
from .._progress import resolve as resolve_progress
from .._threads import effective_n_threads, new_scope
from ..coreset import Coreset, equal_draw_counts
from ..kernels import SteinKernel
from ..methods import METHODS
from .inputs import as_dask, same_files
from .runtime import compute, import_dask
from .tasks import block_task, reduce_task, sample_task

__all__ = ["compress", "DEBIASED"]

#: Debiased methods usable in the map and the reduce (they need the scores S).
DEBIASED = tuple(name for name, spec in METHODS.items() if spec.debiased)
POINT_KEYS, SCORE_KEYS = _io.POINT_KEYS, _io.SCORE_KEYS


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
        Passed to ``dask.compute`` (default: the active scheduler, a ``distributed.Client`` if one
        exists).
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
    Cost: one block's compression per map task (e.g. SKT on n_b rows), one compression of at most
    ``fan_in * block_size`` rows per reduce node; only block coresets travel to the driver.

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
    array([322, 392, 464, 564, 736])
    >>> again = scd.compress(Xd, Sd, size=16, method="skt", seed=0, scheduler="threads")
    >>> bool(np.array_equal(again.indices, res.indices))
    True
    """
    dask, da = import_dask()
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
    Xd = as_dask(X, "X", POINT_KEYS)
    # scores read from the points' own files must be named: the only array is the points
    Sd = as_dask(S, "S", SCORE_KEYS, only_array=not same_files(X, S))
    if Xd.shape != Sd.shape:
        chain = _mismatched_chain(X, S)
        raise ValueError(f"X and S must have the same shape, got {Xd.shape} and {Sd.shape}"
                         + (f" (chain {chain})" if chain else ""))
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
        sample = dask.delayed(sample_task, pure=True)
        got = compute(dask, *[sample(Xblocks[b], Sblocks[b],
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
    n_nodes = count_reduce_nodes(n_blocks, fan_in)
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
    # the tasks' cancellation scope: the driver's Ctrl-C stops their loops, and no other
    # call's (not part of the keys: the same call computes the same thing)
    scope = new_scope()
    task_b = dask.delayed(block_task, pure=True)
    task_r = dask.delayed(reduce_task, pure=True)
    level = [
        task_b(Xblocks[b], Sblocks[b], int(offsets[b]), block_size, method, kernel, seeds[b],
               nan_policy, opts, _delay_s, scope, dask_key_name=f"sc-block-{b}-{token}")
        for b in range(n_blocks)
    ]
    node = 0
    while True:
        final = len(level) <= fan_in
        nxt = []
        for g in range(0, len(level), fan_in):
            s = seeds[n_blocks + node]
            nxt.append(task_r(level[g:g + fan_in], size if final else block_size, method,
                              kernel, s, opts, final, scope,
                              dask_key_name=f"sc-reduce-{node}-{token}"))
            node += 1
        level = nxt
        if final:
            break
    if progress:
        stage(f"stein_coreset.distributed: {method} on n = {n} rows in {n_blocks} blocks "
              f"(fan-in {fan_in}, {n_nodes} reduce nodes) ...")
        from dask.diagnostics import ProgressBar

        with ProgressBar(minimum=DELAY_S, out=sys.stderr):
            (out,) = compute(dask, level[0], scheduler=scheduler, scope=scope)
        stage(f"stein_coreset.distributed: {method} done in {time.perf_counter() - t0:.1f} s")
    else:
        (out,) = compute(dask, level[0], scheduler=scheduler, scope=scope)

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
    return Coreset(
        out["indices"], out["weights"], out["points"], out["kind"], method, out["ksd"], info,
        draw_indices, draws,
    )


def _mismatched_chain(X, S) -> str | None:
    """The first chain whose points and scores differ in shape, when both are given as lists
    of arrays (``"1: X[1] is (100, 2), S[1] is (50, 2)"``)."""
    if not (isinstance(X, (list, tuple)) and isinstance(S, (list, tuple))):
        return None
    if len(X) != len(S):
        return f"count: {len(X)} chains of points, {len(S)} of scores"
    for i, (x, s) in enumerate(zip(X, S, strict=True)):
        xs, ss = getattr(x, "shape", None), getattr(s, "shape", None)
        if xs is not None and ss is not None and tuple(xs) != tuple(ss):
            return f"{i}: X[{i}] has shape {tuple(xs)}, S[{i}] has {tuple(ss)}"
    return None


def count_reduce_nodes(n_blocks: int, fan_in: int) -> int:
    count, k = 0, n_blocks
    while True:
        k = -(-k // fan_in)
        count += k
        if k == 1:
            return count

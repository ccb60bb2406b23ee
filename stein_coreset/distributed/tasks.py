"""The tasks the workers run: the map (compress one row block to a block coreset targeting P)
and the reduce (merge block coresets and compress the union again)."""

from __future__ import annotations

import threading
import time

import array_api_compat
import numpy as np

from .._array_api import to_host
from .._threads import call_scope
from ..compress import compress as sc_compress

__all__ = ["TaskCancelled", "block_task", "reduce_task", "sample_task"]


def block_arrays(Xb, Sb):
    """A block as float64 in its own namespace: NumPy blocks as NumPy, CuPy blocks stay on
    their GPU (the compression of the block runs there)."""
    if array_api_compat.is_numpy_array(Xb) and array_api_compat.is_numpy_array(Sb):
        return np, np.asarray(Xb, dtype=np.float64), np.asarray(Sb, dtype=np.float64)
    xp = array_api_compat.array_namespace(Xb, Sb)
    return xp, xp.astype(Xb, xp.float64), xp.astype(Sb, xp.float64)


def sample_task(Xb, Sb, local):
    """Rows ``local`` of a block, on the host (the sample fixing the kernel bandwidth)."""
    xp, Xb, Sb = block_arrays(Xb, Sb)
    idx = xp.asarray(local, device=array_api_compat.device(Xb))
    return to_host(xp.take(Xb, idx, axis=0)), to_host(xp.take(Sb, idx, axis=0))


class TaskCancelled(RuntimeError):
    """A task's loops were stopped because the driver was interrupted (Ctrl-C)."""


def task_compress(*args, scope: int = 0, **kw):
    """``compress`` inside a task, without its input diagnostics (``diagnostics=False``): a
    block may hold only burn-in and a reduce node only debiased points, so Stein's identity
    judged there says nothing of the user's input (and a warning from a worker reaches no
    one). It runs under the driver's cancellation ``scope``
    (:func:`stein_coreset._threads.call_scope`), so the driver's Ctrl-C stops this call's loops
    and no other's. Loops stopped for it end the task with :class:`TaskCancelled`, an ordinary
    error, not the KeyboardInterrupt they raise in a user's thread: a Dask worker treats the
    latter as its own interruption."""
    with call_scope(scope):
        try:
            return sc_compress(*args, diagnostics=False, **kw)
        except KeyboardInterrupt:
            if threading.current_thread() is threading.main_thread():
                raise  # the synchronous scheduler: the user's own Ctrl-C
            raise TaskCancelled("stopped: the driver was interrupted") from None


def block_task(Xb, Sb, offset, size, method, kernel, seed, nan_policy, options, delay_s,
               scope=0):
    """Map: compress one block; return (global indices, weights, points, scores, info).

    The block is compressed in its own namespace (NumPy, or CuPy on the worker's GPU); only the
    block coreset (``size`` rows) comes back to the host."""
    if delay_s:
        time.sleep(delay_s)
    xp, Xb, Sb = block_arrays(Xb, Sb)
    n = Xb.shape[0]
    if nan_policy == "omit" and not bool(xp.any(xp.all(xp.isfinite(Xb), axis=1)
                                                & xp.all(xp.isfinite(Sb), axis=1))):
        # a block of NaN rows only: it carries no mass, like its rows in the single-process path
        return empty_part(Xb.shape[1], {"n": n, "offset": offset, "size": 0, "ksd": None,
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
    opts = fit_options(options, n_ok)
    res = task_compress(
        Xb, Sb, size=min(size, n_ok), method=method, kernel=kernel,
        seed=np.random.default_rng(seed), nan_policy=nan_policy, scope=scope, **opts,
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


def empty_part(d, info):
    return {"indices": np.zeros(0, dtype=np.int64), "weights": np.zeros(0),
            "points": np.zeros((0, d)), "scores": np.zeros((0, d)), "mass": 0.0, "info": info}


def fit_options(options, n):
    opts = dict(options)
    if opts.get("rank") is not None:
        opts["rank"] = min(int(opts["rank"]), n)
    return opts


def reduce_task(parts, size, method, kernel, seed, options, final, scope=0):
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
        part = empty_part(X.shape[1], {"n_union": 0, "size": 0, "ksd": None, "time_s": 0.0,
                                        "input_mass_kept": 0.0})
        part.update(blocks=blocks, reduce=[r for p in parts for r in p.get("reduce", [])])
        return part
    opts = fit_options(options, n)
    res = task_compress(
        X, S, size=min(size, n), method=method, kernel=kernel,
        seed=np.random.default_rng(seed), scope=scope, **opts,
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

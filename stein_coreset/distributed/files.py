"""Chain files on a cluster (:func:`run_cli`): what ``stein-coreset compress --workers N`` (or
``--scheduler``) does, callable from Python."""

from __future__ import annotations

import json
import os

import numpy as np

from .. import _io
from ..coreset import Coreset
from .mapreduce import compress
from .runtime import import_dask, import_distributed

__all__ = ["run_cli"]


def local_cluster(workers: int):
    """A loopback ``LocalCluster`` of ``workers`` single-threaded worker processes (no dashboard
    on a fixed port: several clusters on one machine do not collide)."""
    distributed = import_distributed()
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
    force: bool = False,
    **kw,
) -> Coreset:
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
        (JSON, without the per-stage lists) to this ``.npz`` (``.npz`` is appended when
        missing), atomically. Checked before any work: it may not be one of the input files
        (in any spelling), nor an existing file unless ``force``; a device or pipe
        (``/dev/stdout``) is written in place, with no suffix.
    scores : list of str, optional
        Score files, one per entry of ``paths`` (default: the scores inside each ``.npz``).
    force : bool
        Replace an existing ``out`` (never an input file).
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
    if workers is not None:
        check_workers(int(workers))
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
    target = _io.check_output(out, [*paths, *Sp], force=force, what="out",
                              force_hint="pass force=True to replace it")  # before any work
    import_dask()
    client = cluster = None
    try:
        if workers is not None:
            distributed = import_distributed()
            cluster = local_cluster(int(workers))
            client = distributed.Client(cluster)
        elif scheduler is not None:
            distributed = import_distributed()
            client = distributed.Client(scheduler)
        n_workers = None if client is None else len(client.scheduler_info()["workers"])
        res = compress(paths, Sp, size=size, method=method, seed=seed, **kw)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    res.info["workers"] = n_workers
    if target is not None:
        summary = {k: v for k, v in res.info.items() if k not in ("blocks", "reduce")}
        _io.write_coreset(target, res, json.dumps(summary, default=_json_default))
    return res


#: Memory a local cluster's worker process takes before it holds any data (Python, NumPy,
#: Dask and the library imported; measured at ~100 MB), for :func:`check_workers`.
WORKER_BYTES = 100 * 2**20
#: Worker processes per CPU a local cluster may start (each beyond the CPUs only waits).
MAX_WORKERS_PER_CPU = 4


def check_workers(workers: int) -> None:
    """Refuse, before any process starts, a local cluster this machine cannot hold: more than
    :data:`MAX_WORKERS_PER_CPU` worker processes per CPU, or more than its memory holds at
    :data:`WORKER_BYTES` each (before: ``--workers 1000000000`` spawned processes for 14 s,
    then failed with a MemoryError)."""
    from .._validation import physical_memory

    cpus = os.cpu_count() or 1
    cap = MAX_WORKERS_PER_CPU * cpus
    mem = physical_memory()
    if mem is not None:
        cap = max(1, min(cap, mem // WORKER_BYTES))
    if workers > cap:
        memory = "" if mem is None else f" and {mem / 2**30:.3g} GiB of memory"
        raise ValueError(
            f"workers (--workers) = {workers}: a local cluster runs one process per worker "
            f"(~{WORKER_BYTES // 2**20} MB each before any data); this machine has {cpus} "
            f"CPUs{memory}, room for at most {cap}; pass workers <= {cap}, or connect to a "
            "larger cluster with scheduler (--scheduler)"
        )


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return repr(o)

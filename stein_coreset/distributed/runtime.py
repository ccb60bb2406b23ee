"""Dask at run time: the optional imports, with the message a missing extra gives, and
``dask.compute`` whose Ctrl-C also stops the library's loops of this call's tasks, and no
other's."""

from __future__ import annotations

from .._threads import cancel_scope

__all__ = ["NEEDS_DASK", "CANCEL_WAIT_S", "compute", "cancel_on_workers", "import_dask",
           "import_distributed"]

#: What a missing Dask says (the CLI prints it as is).
NEEDS_DASK = (
    "the distributed path (stein_coreset.distributed; several chain files, --workers, "
    "--scheduler or --block-size on the command line) needs the optional extra 'dask': "
    "pip install -r requirements/dask.txt (from the source tree)"
)


def compute(dask, *args, scope: int = 0, **kw):
    """``dask.compute`` whose Ctrl-C also stops the C++ loops of the tasks begun under
    ``scope`` (:func:`stein_coreset._threads.call_scope`; the tasks of one
    :func:`~stein_coreset.distributed.compress` call share one): on the threaded scheduler's
    worker threads, which would otherwise run them to the end, holding the exit, and on the
    workers of a ``distributed`` client, where the running ones would otherwise hold the
    workers, and the next call, for a block's time (Dask releases the graph's queued tasks).
    Other calls' tasks, other threads' calls and the next calls run as if nothing happened:
    nothing is left set."""
    try:
        return dask.compute(*args, **kw)
    except KeyboardInterrupt:
        if scope:
            cancel_scope(scope)
            if kw.get("scheduler") is None:  # the default scheduler: a distributed client if any
                cancel_on_workers(scope)
        raise


#: Seconds the driver waits, after a Ctrl-C, for the workers to stop their loops.
CANCEL_WAIT_S = 1.0


def cancel_on_workers(scope: int) -> None:
    """Stop the library's loops of the tasks begun under ``scope`` on the workers of the
    current ``distributed`` client, if any, waiting at most :data:`CANCEL_WAIT_S` (after a
    terminal's Ctrl-C the workers may be gone too: nothing to stop there)."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return
    import threading

    def run():
        try:
            client.run(cancel_scope, scope)
        except Exception:  # noqa: BLE001 - workers shutting down: nothing left to stop
            pass

    t = threading.Thread(target=run, name="stein_coreset-cancel", daemon=True)
    try:
        t.start()
    except RuntimeError:  # no thread to spare: the user's KeyboardInterrupt goes on as it is
        return
    t.join(CANCEL_WAIT_S)


def import_dask():
    try:
        import dask
        import dask.array as da
    except ImportError as e:
        raise ImportError(f"{NEEDS_DASK} ({e})") from e
    return dask, da


def import_distributed():
    try:
        import distributed
    except ImportError as e:
        raise ImportError(f"{NEEDS_DASK} ({e})") from e
    return distributed

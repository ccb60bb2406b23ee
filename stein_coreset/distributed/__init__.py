"""Debiased compression of inputs that do not fit one process, on Dask.

Scheme (docs/distributed.md): *map* -- every row block of (X, S) is compressed by a debiased
method of :func:`stein_coreset.compress` to an intermediate coreset targeting P; *reduce* -- the
block coresets are merged (groups of ``fan_in``, as a tree) and the union is compressed again by
the same debiased method, whose first stage (Stein thinning / Low-rank Debiasing weights) re-weights
the union towards P, so a block of pure burn-in gets little weight. The Stein kernel is fixed once
(IMQ, median bandwidth of a small sample of the input) and used in every block and every reduce.
Per-task seeds come from ``numpy.random.SeedSequence(seed)``, so the result does not depend on the
number of workers, their order or retries. Only block coresets travel to the driver.

Needs the optional extra ``dask`` (``dask[array]``, ``distributed``). Modules: :mod:`.mapreduce`
(the driver, :func:`compress`), :mod:`.tasks` (what the workers run), :mod:`.inputs` (dask
arrays, arrays in memory or chain files read lazily), :mod:`.files` (:func:`run_cli`: chain
files on a cluster), :mod:`.runtime` (the optional imports, Ctrl-C on the workers).
"""

from __future__ import annotations

from .files import run_cli
from .mapreduce import compress

__all__ = ["compress", "run_cli"]

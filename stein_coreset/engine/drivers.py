"""The host side the compiled backends share: the drivers of the loops that run in chunks of steps
(weighted RPCholesky and AMD), and the arguments of the compiled DKSD passes.

The ``cpu`` and ``cuda`` backends pass their compiled step function; the driver owns the
state's set-up, the chunking (progress, Ctrl-C between chunks, AMD's monitor) and the result,
so that both backends run one driver.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _array_api as aa
from .._progress import progress_bar

__all__ = ["weighted_rpcholesky", "amd", "compiled_components"]


def weighted_rpcholesky(K, w, rank: int, rows: int, u: np.ndarray, progress: bool, steps):
    """Weighted RPCholesky (Alg. F.1) by the compiled ``steps(K, sw, d, Ft, pivots, i0, i1,
    u, tol) -> stop`` of a backend: F built as the rows of F^T (each pivot writes one
    contiguous row) of a zeroed (rows, n) array, returned whole with ``(pivots, Ft, scale,
    sw)``. Host arrays for NumPy, device arrays otherwise."""
    xp, dev, n = K.xp, K.device, K.n
    if aa.is_numpy(xp):
        wh = np.asarray(aa.to_host(w), dtype=np.float64)
        sw = np.sqrt(np.clip(wh, 0.0, None))
        d = np.asarray(aa.to_host(K.diag()), dtype=np.float64) * wh
    else:
        wh = xp.astype(w, xp.float64)
        sw = xp.sqrt(xp.clip(wh, 0.0, None))
        d = K.diag() * wh
    d = xp.where(d > 0.0, d, 0.0)
    scale = float(xp.sum(d))
    Ft = xp.zeros((rows, n), dtype=xp.float64, device=dev)
    piv = xp.zeros((rank,), dtype=xp.int64, device=dev)
    chunk = max(1, math.ceil(rank / 25)) if progress else rank
    starts = range(0, rank, chunk)
    if progress:
        starts = progress_bar(starts, desc="weighted RPCholesky", total=len(starts))
    r = rank
    for i0 in starts:
        i1 = min(rank, i0 + chunk)
        r = steps(K, sw, d, Ft[:rank, ...], piv, i0, i1, u[i0:i1], 1e-14 * scale)
        if r < i1:
            break
    return aa.to_host(piv[:r], np.int64), Ft, scale, sw


def amd(op, steps: int, w0, eta: float, progress: bool, n_threads: int, track,
        check_every: int, lowrank_steps):
    """AMD (Alg. F.2) fused on ``op.rounded()``: the operator's ``factor32() -> (G, e)`` and the
    backend's ``lowrank_steps(G, res, w, v, t0, k, eta, n_threads)``; ``(w, steps run)``. F is
    stored in float32 (relative error ~1e-7 in F F^T, far below the low-rank approximation
    error of K')."""
    # K' -> 2^-2e K' and eta -> 2^2e eta leave every iterate unchanged, exactly (powers of two);
    # e puts max|F| near 1, so float32 storage of F neither overflows nor underflows.
    F, e = op.factor32()
    xp = op.xp
    if aa.is_numpy(xp):
        res = np.ascontiguousarray(np.ldexp(np.asarray(op.residual, dtype=np.float64), -2 * e))
    else:  # the same values: a product with a power of two rounds as ldexp does
        res = xp.astype(op.residual, xp.float64) * math.ldexp(1.0, -2 * e)
    eta = math.ldexp(eta, 2 * e)
    w = xp.asarray(w0, dtype=xp.float64, copy=True)
    v = xp.asarray(w, copy=True)
    if track is not None:
        chunk = check_every
    else:
        chunk = max(1, math.ceil(steps / 25)) if progress else max(steps, 1)
    starts = range(0, steps, chunk)
    if progress:
        starts = progress_bar(starts, desc=f"AMD (chunks of {chunk} steps)", total=len(starts))
    for t0 in starts:
        k = min(chunk, steps - t0)
        lowrank_steps(F, res, w, v, t0, k, eta, n_threads)
        if track is not None and track(t0 + k, w):
            return w, t0 + k
    return w, steps


def compiled_components(comps):
    """The compiled DKSD passes' per-component arguments of ``comps`` (pairs of a compiled base
    kernel and its weight lambda): (codes, sigmas, betas, lambdas) host arrays."""
    return (np.asarray([int(b.code) for b, _ in comps], dtype=np.intc),
            np.asarray([float(b.sigma) for b, _ in comps]),
            np.asarray([float(b.beta) for b, _ in comps]),
            np.asarray([float(lam) for _, lam in comps]))

"""The authors' own code (goodpoints.jax, Li, Dwivedi & Mackey 2024) run on the same input as
stein_coreset, for side-by-side timings and KSDs (tools/device/gpu_check.py --goodpoints).

goodpoints.jax is pure Python over JAX, so it runs wherever JAX does (the GPU when JAX has
CUDA). Every function takes host arrays X, S (n, d) with the Stein IMQ kernel
(1 + r^2 / sigma^2)^(-1/2), M = I, and returns ``(indices with repeats or None, weights over
the n points, seconds)``; the KSD is evaluated afterwards with stein_coreset's kernel, so both
libraries are scored by one formula.

    import goodpoints_jax as gpj  # from tools/device/ (gpu_check.py's sibling)
    idx, w, secs = gpj.skt(X, S, sigma, m, seed=0)
"""

from __future__ import annotations

import math
import time

import numpy as np


def missing() -> str | None:
    """Why goodpoints.jax cannot run here (its modules and what they import: JAX, qpsolvers),
    or None when it can."""
    try:
        import goodpoints.jax.compress  # noqa: F401
        import goodpoints.jax.kt  # noqa: F401
        import goodpoints.jax.lr_debias  # noqa: F401
        import jax  # noqa: F401
    except Exception as e:  # ImportError, or a broken JAX install
        return f"{type(e).__name__}: {e}"
    return None


def _setup(X, S, sigma):
    import jax

    jax.config.update("jax_enable_x64", True)
    from goodpoints.jax.kernel.precond_stein import PrecondSteinKernel
    from goodpoints.jax.kernel.scalar import imq

    d = X.shape[1]
    kernel = PrecondSteinKernel(imq, np.eye(d), float(sigma) ** 2)
    return kernel, kernel.prepare_input(np.asarray(X, np.float64), np.asarray(S, np.float64))


def _block(x):
    import jax

    return jax.block_until_ready(x)


def st(X, S, sigma, m, seed=0):
    """Stein thinning (Alg. D.1), m greedy steps."""
    from goodpoints.jax.st import stein_thin

    kernel, pts = _setup(X, S, sigma)
    t0 = time.perf_counter()
    w, _ = stein_thin(kernel, pts, int(m), weight_type="integer")
    w = np.asarray(_block(w))
    return None, w / w.sum(), time.perf_counter() - t0


def skt(X, S, sigma, m, seed=0):
    """Stein kernel thinning (Alg. 1): Stein thinning to n' = m 2^ceil(log2(n/m)) steps, then
    KT targeting P (KT-SPLIT + KT-Swap with the Stein thinning baseline)."""
    from goodpoints.jax.kt import kt
    from goodpoints.jax.st import stein_thin

    kernel, pts = _setup(X, S, sigma)
    n = X.shape[0]
    n_prime = int(m) * 2 ** math.ceil(math.log2(n / m))
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    w, _ = stein_thin(kernel, pts, n_prime, weight_type="integer")
    w = np.asarray(_block(w), dtype=np.float64)
    idx = np.asarray(kt(kernel, pts, w / w.sum(), rng, inflate_size=n_prime, out_size=int(m)))
    secs = time.perf_counter() - t0
    return idx, np.bincount(idx, minlength=n) / idx.size, secs


def lskt(X, S, sigma, m, seed=0, tau=0.5):
    """Low-rank SKT (Alg. 3): low-rank debiasing (rank n^tau, 7 sqrt(n) AMD steps, App. I.2),
    then KT-Compress++ to sqrt(4^ceil(log4 n)) points. ``m`` is used only to check the size."""
    from goodpoints.jax.compress import kt_compresspp
    from goodpoints.jax.lr_debias import lr_debias

    kernel, pts = _setup(X, S, sigma)
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    rank = math.ceil(n**tau)
    inflate = 4 ** math.ceil(math.log(n, 4))
    t0 = time.perf_counter()
    w, _, _ = lr_debias(kernel, pts, rng, rank=rank, num_iter=math.ceil(7 * math.sqrt(n)))
    w = np.asarray(_block(w), dtype=np.float64)
    idx = np.asarray(kt_compresspp(kernel, pts, w / w.sum(), rng, inflate_size=inflate))
    secs = time.perf_counter() - t0
    return idx, np.bincount(idx, minlength=n) / idx.size, secs


def _weighted(name):
    """The authors' pipeline ``goodpoints.jax.dtc.<name>`` (Stein / Low-rank Stein
    Recombination or Cholesky, Algs. 5 and 7: Stein thinning for n steps or low-rank debiasing
    at rank m with 7 m AMD steps, then Recombination or Cholesky thinning to m points). sr and
    lsr end with a simplex QP through qpsolvers' proxqp (the ``proxsuite`` package)."""

    def run(X, S, sigma, m, seed=0):
        from goodpoints.jax import dtc

        kernel, pts = _setup(X, S, sigma)
        t0 = time.perf_counter()
        w, _ = getattr(dtc, name)(kernel, pts, int(m), seed=seed)
        w = np.asarray(_block(w), dtype=np.float64)
        return None, w / w.sum(), time.perf_counter() - t0

    run.__name__ = name
    return run


METHODS = {"st": st, "skt": skt, "lskt": lskt,
           **{name: _weighted(name) for name in ("sr", "sc", "lsr", "lsc")}}

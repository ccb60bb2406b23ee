"""The estimators' DKSD pair pass on the ``cuda`` backend (Barp et al., 2019, Eq. 7; the kernel is
``src_cuda/dksd.cu``, a module of its own compiled on first use)."""

from __future__ import annotations

import numpy as np

from . import config
from .source import KNOWN_BASES, blocks, module

__all__ = ["dksd_pass"]


def dksd_pass(U, V, F, full: bool, base, sigma, beta, lam, need_grad: bool):
    """The DKSD pair pass (Barp et al., 2019, Eq. 7; ``engine/cpu/src_cpp/dksd.hpp``) on the device:
    ``(total, Gv, Gf)`` as ``_core.dksd_pass`` returns them, Gv (n, d) and Gf (F's shape)
    CuPy arrays, or None without ``need_grad``.

    U, V are (n, d) CuPy arrays, F the diffusion in canonical form ((n, d), or (n, d, d) when
    ``full``) on their device; base, sigma, beta, lam host sequences, one entry per component.
    One thread per row sums its pairs in column order (``dksd_rows`` of dksd.cu: the terms of
    radial.inc; its adjoint sums in registers for d <= :data:`config.DKSD_REGISTER_D`) and the host
    adds the (n,) row values in chunks of :data:`config.DKSD_ROWS`, so value and adjoints are the
    C++'s to rounding (the C++ sums a row in vectorised column blocks). O(n^2 d) work
    (O(n^2 d^2) with a full diffusion), O(n d) memory (O(n d^2) full)."""
    import cupy as cp

    n, d = int(U.shape[0]), int(U.shape[1])
    if n < 2 or d < 1:
        raise ValueError("dksd_pass needs at least 2 points and 1 coordinate")
    fs = n * d * d if full else n * d
    params = [np.asarray(a).reshape(-1) for a in (base, sigma, beta, lam)]
    if any(a.size != d for a in params):
        raise ValueError("base, sigma, beta and lam need one entry per coordinate")
    codes, sig, bet, lm = params
    if not np.all(np.isin(codes, list(KNOWN_BASES.values()))):
        raise ValueError(f"unknown base kernel code in {codes.tolist()}")
    shared = bool(np.all(codes == codes[0]) and np.all(sig == sig[0]) and np.all(bet == bet[0]))
    device_id = int(U.device.id)
    with cp.cuda.Device(device_id):
        U = cp.ascontiguousarray(U, dtype=cp.float64)
        V = cp.ascontiguousarray(V, dtype=cp.float64)
        Ff = cp.ascontiguousarray(F, dtype=cp.float64).reshape(-1)
        if Ff.size != fs:
            raise ValueError(f"F must have {fs} entries, got {Ff.size}")
        rows = cp.empty(n, dtype=cp.float64)
        Gv = cp.empty((n, d) if need_grad else 1, dtype=cp.float64)
        Gf = cp.empty(fs if need_grad else 1, dtype=cp.float64)
        c = 1.0 / (float(n) * float(n - 1))
        args = (U, V, Ff, np.int64(n), np.int32(d), cp.asarray(codes.astype(np.int32)),
                cp.asarray(sig.astype(np.float64)), cp.asarray(bet.astype(np.float64)),
                cp.asarray(lm.astype(np.float64)), np.int32(shared), np.float64(c),
                np.int32(bool(need_grad)), rows, Gv, Gf)
        if need_grad and d <= config.DKSD_REGISTER_D[bool(full)]:
            name = f"dksd_rows_{'full_' if full else ''}d{d}"
        else:
            name, args = "dksd_rows", args + (np.int32(bool(full)),)
        module(device_id, "dksd").get_function(name)((blocks(n),), (config.CONFIG.block,), args)
        r = cp.asnumpy(rows)
    chunks = np.zeros(-(-n // config.DKSD_ROWS) * config.DKSD_ROWS)
    chunks[:n] = r
    # cumsum adds in sequence: each chunk's rows in order, then the chunks in order
    total = float(np.cumsum(np.cumsum(chunks.reshape(-1, config.DKSD_ROWS), axis=1)[:, -1])[-1])
    if not need_grad:
        return total, None, None
    return total, Gv, Gf.reshape((n, d, d) if full else (n, d))

"""The DKSD pair pass on any array-API namespace: blocked (block x n) slabs, the reference the
C++ pass (:mod:`stein_coreset.engine.native`) is tested against, the ``xp`` backend's
:meth:`~stein_coreset.engine.xp.XpBackend.dksd_pass`.

U-statistic sum_{i != j} k0(x_i, x_j) / (n (n - 1)) in canonical form (Barp et al., 2019,
Eq. 7, App. B.3) and its adjoints dL/dv_i, dL/dm_i. Cost O(n^2 d) for diagonal m (O(n^2 d^2)
full), memory O(block n).
"""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from .arrays import SLAB_ENTRIES, squared_distances

__all__ = ["block_rows", "pair_pass", "HOST_SLAB_ENTRIES"]


#: Entries of one (block x n) slab on the host: small enough to stay in cache (measured ~5x
#: faster than 4M-entry slabs with NumPy at n = 1000); accelerators get SLAB_ENTRIES // 4.
HOST_SLAB_ENTRIES = 1 << 16


def block_rows(n: int, block_size: int | None, xp=None) -> int:
    """Rows per (block x n) slab: ``block_size`` if given, else a cache-sized slab."""
    if block_size:
        return int(block_size)
    entries = HOST_SLAB_ENTRIES if xp is None or aa.is_numpy(xp) else SLAB_ENTRIES // 4
    return max(1, entries // max(n, 1))


def _slab(xp, U, a0, a1, cols, c):
    """Rows a0:a1 of the pair pass: their points, squared distances to all n, the U-statistic
    weights c [i != j] and the mask q > 0."""
    Ua = U[a0:a1, ...]
    q = squared_distances(xp, Ua, U)
    rows = xp.arange(a0, a1, device=aa.device_of(U))
    W = c * xp.astype(rows[:, None] != cols[None, :], xp.float64)
    return Ua, q, W, q > 0.0


def _pair_pass_shared_diag(U, V, F, base, lam, need_grad, block_size=None):
    """:func:`pair_pass` for one shared base kernel and a diagonal F, as matrix products.

    Summing the per-component terms over r first turns them into (block x n) @ (n x d) and
    (block x d) @ (d x n) products (O(n^2 d) flops in BLAS) and leaves O(1) elementwise work per
    pair, instead of O(d) per pair in the component loop.
    """
    xp, dev = aa.namespace(U=U)
    n = int(U.shape[0])
    c = 1.0 / (n * (n - 1))
    b = block_rows(n, block_size, xp)
    lam = aa.from_host(np.asarray(lam, dtype=np.float64), xp=xp, device=dev)[None, :]
    d = int(U.shape[1])
    FU, FU2, UV = F * U, F * U * U, U * V
    LV, LF = lam * V, lam * F
    # sum_r of the component terms as three products (left (n, k d) x right (n, k d)^T):
    #   G0 = sum_r lam v_a v_b, G1 = sum_r lam (v_a Q - P v_b + R), G2 = sum_r lam P Q
    L1 = xp.concat([LV * U, -LV, -LF * U, LF, LF], axis=1)
    R1 = xp.concat([F, FU, V, UV, F], axis=1)
    L2 = xp.concat([LF * U * U, -2.0 * LF * U, LF], axis=1)
    R2 = xp.concat([F, FU, FU2], axis=1)
    Rg1 = xp.concat([F, FU, V, UV], axis=1)
    cols = xp.arange(n, device=dev)
    total = 0.0
    gv_parts, gf_parts = [], []
    for a0 in range(0, n, b):
        a1 = min(n, a0 + b)
        Ua, q, W, qpos = _slab(xp, U, a0, a1, cols, c)
        k0, k1, qk2 = base.radial(xp, q)
        k2 = xp.where(qpos, qk2 / xp.where(qpos, q, 1.0), 0.0)
        T = (k0 * (LV[a0:a1, ...] @ V.T) - 2.0 * k1 * (L1[a0:a1, ...] @ R1.T)
             - 4.0 * k2 * (L2[a0:a1, ...] @ R2.T))
        total += float(xp.sum(W * T))
        if need_grad:
            A1 = W * k1
            g1 = A1 @ Rg1  # [A1 F, A1 FU, A1 V, A1 UV]
            g2 = (W * k2) @ R2  # [A2 F, A2 FU, A2 FU2]
            A1F, A1FU, A1V, A1UV = (g1[:, i * d : (i + 1) * d] for i in range(4))
            A2F, A2FU, A2FU2 = (g2[:, i * d : (i + 1) * d] for i in range(3))
            gv = (W * k0) @ V - 2.0 * Ua * A1F + 2.0 * A1FU
            gf = (2.0 * (Ua * A1V - A1UV)
                  - 4.0 * (Ua * Ua * A2F - 2.0 * Ua * A2FU + A2FU2)
                  - 2.0 * A1F)
            gv_parts.append(2.0 * lam * gv)
            gf_parts.append(2.0 * lam * gf)
    if not need_grad:
        return total, None, None
    return total, xp.concat(gv_parts, axis=0), xp.concat(gf_parts, axis=0)



def pair_pass(U, V, kind, F, comps, need_grad, block_size=None, vectorise=True):
    """U-statistic sum_{i != j} k0(x_i, x_j) / (n (n - 1)) in canonical form, and its adjoints.

    U: (n, d) whitened points; V: (n, d) transformed v; kind "diag" (F (n, d)) or "full"
    (F (n, d, d)); comps: per-component (base, lambda). Returns (loss, G_V, G_F).
    ``vectorise``: one shared base kernel with a diagonal F runs as matrix products
    (:func:`_pair_pass_shared_diag`); False forces the per-component loop.
    """
    if vectorise and kind == "diag" and len({id(base) for base, _ in comps}) == 1:
        return _pair_pass_shared_diag(U, V, F, comps[0][0], [lam for _, lam in comps],
                                      need_grad, block_size)
    xp, dev = aa.namespace(U=U)
    n, d = int(U.shape[0]), int(U.shape[1])
    c = 1.0 / (n * (n - 1))
    b = block_rows(n, block_size, xp)
    total = 0.0
    gv_parts, gf_parts = [], []
    cols = xp.arange(n, device=dev)
    if kind == "full":
        Mcols = [F[:, :, r] for r in range(d)]
        zs = [xp.sum(Mr * U, axis=1) for Mr in Mcols]
    for a0 in range(0, n, b):
        a1 = min(n, a0 + b)
        Ua, q, W, qpos = _slab(xp, U, a0, a1, cols, c)
        qsafe = xp.where(qpos, q, 1.0)
        cache = {}
        gv_cols, gf_cols = [], []
        for r in range(d):
            base, lam = comps[r]
            key = id(base)
            if key not in cache:
                k0, k1, qk2 = base.radial(xp, q)
                cache[key] = (k0, k1, xp.where(qpos, qk2 / qsafe, 0.0))
            k0, k1, k2 = cache[key]
            if kind == "diag":
                dr = Ua[:, r : r + 1] - U[None, :, r]
                fa = F[a0:a1, r : r + 1]
                fb = F[None, :, r]
                P, Q, R = fa * dr, fb * dr, fa * fb
            else:
                Mr = Mcols[r]
                P = zs[r][a0:a1, None] - Mr[a0:a1, ...] @ U.T
                Q = Ua @ Mr.T - zs[r][None, :]
                R = Mr[a0:a1, ...] @ Mr.T
            va = V[a0:a1, r : r + 1]
            vb = V[None, :, r]
            T = k0 * va * vb - 2.0 * k1 * (va * Q - P * vb + R) - 4.0 * k2 * P * Q
            total += lam * float(xp.sum(W * T))
            if need_grad:
                g = 2.0 * lam
                gv_cols.append(g * xp.sum(W * (k0 * vb - 2.0 * k1 * Q), axis=1))
                AP = W * (2.0 * k1 * vb - 4.0 * k2 * Q)
                AR = -2.0 * k1 * W
                if kind == "diag":
                    gf_cols.append(g * (xp.sum(AP * dr, axis=1) + AR @ F[:, r]))
                else:
                    gf_cols.append(g * (Ua * xp.sum(AP, axis=1)[:, None] - AP @ U + AR @ Mr))
        if need_grad:
            gv_parts.append(xp.stack(gv_cols, axis=1))
            gf_parts.append(xp.stack(gf_cols, axis=1 if kind == "diag" else 2))
    if not need_grad:
        return total, None, None
    return total, xp.concat(gv_parts, axis=0), xp.concat(gf_parts, axis=0)


"""The DKSD pair pass on any array-API namespace: blocked (block x n) slabs, the reference the
compiled passes (``engine/cpu/src_cpp/dksd.hpp``, ``engine/cuda/src_cuda/dksd.cu``) are tested
against, the reference backend's :meth:`~stein_coreset.engine.reference.ReferenceBackend.dksd_pass`.

U-statistic sum_{i != j} k0(x_i, x_j) / (n (n - 1)) in canonical form (Barp et al., 2019,
Eq. 7, App. B.3) and its adjoints dL/dv_i, dL/dm_i. Cost O(n^2 d) for diagonal m (O(n^2 d^2)
full), memory O(block n).
"""

from __future__ import annotations

import numpy as np

from ... import _array_api as aa
from ..arrays import SLAB_ENTRIES, squared_distances

__all__ = ["block_rows", "pair_pass", "HOST_SLAB_ENTRIES"]


#: Entries of one (block x n) slab on the host: small enough to stay in cache (measured ~5x
#: faster than 4M-entry slabs with NumPy at n = 1000; 2^15 ~7% faster than 2^16 for the
#: diagonal pass at n = 4000, d = 10); accelerators get SLAB_ENTRIES // 4.
HOST_SLAB_ENTRIES = 1 << 15


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


def _squared_distances_t(Ua, UT):
    """``squared_distances(xp, Ua, U)`` bit for bit (coordinates added in order from 0) from
    UT = U.T as a contiguous (d, n) array: each coordinate's row broadcasts from contiguous
    memory (~1.6x faster with NumPy than U's strided columns)."""
    q = None
    for c in range(int(UT.shape[0])):
        diff = Ua[:, c : c + 1] - UT[c : c + 1, :]
        q = diff * diff if q is None else q + diff * diff
    return q


def _groups(comps):
    """The components grouped by base kernel (the same object), in order of first appearance:
    ``[(base, [r, ...]), ...]``."""
    groups: dict[int, tuple] = {}
    for r, (base, _lam) in enumerate(comps):
        groups.setdefault(id(base), (base, []))[1].append(r)
    return list(groups.values())


def _radial_terms(xp, base, q, qpos, qsafe):
    """(kappa, kappa', kappa'') of ``base`` at q, kappa'' = 0 where q = 0."""
    return base.dksd_radial(xp, q, qpos, qsafe)


def _offdiag_product(xp, K, R, a0, a1, offdiag):
    """sum_{j != i} K[i, j] R[j, :] for the slab rows i = a0 .. a1 - 1: the product with the
    slab's diagonal block masked (exactly: no subtraction), the rest as two plain products."""
    out = (K[:, a0:a1] * offdiag) @ R[a0:a1, ...]
    if a0 > 0:
        out = out + K[:, :a0] @ R[:a0, ...]
    if a1 < int(R.shape[0]):
        out = out + K[:, a1:] @ R[a1:, ...]
    return out


def _pair_pass_diag(U, V, F, comps, need_grad, block_size=None):
    """:func:`pair_pass` for a diagonal F, as matrix products, one group of components per
    distinct base kernel.

    For the components r of one kernel, with delta_r = u_ir - u_jr, P = f_ir delta_r,
    Q = f_jr delta_r, R = f_ir f_jr, every sum over j != i of a slab row is a product of the
    (block x n) radial terms with (n x m) columns:

        sum_j k0 v_jr                         = (k0 @ V)_ir
        sum_j k1 (v_ir Q - P v_jr + R)        = v_ir (u_ir A1F - A1FU) - f_ir (u_ir A1V - A1UV)
                                                + f_ir A1F,  [A1F A1FU A1V A1UV] = k1 @ [F FU V UV]
        sum_j k2 P Q                          = f_ir (u_ir^2 A2F - 2 u_ir A2FU + A2FU2),
                                                [A2F A2FU A2FU2] = k2 @ [F FU FU^2]

    so the loss and both adjoints come from the same three products (O(n^2 m) flops in BLAS)
    and O(1) elementwise work per pair besides q and the radial terms. The diagonal j = i is
    masked in the slab's own (block x block) part, never subtracted.
    """
    xp, dev = aa.namespace(U=U)
    n, d = int(U.shape[0]), int(U.shape[1])
    c = 1.0 / (n * (n - 1))
    b = block_rows(n, block_size, xp)
    groups = []
    for base, idx in _groups(comps):
        if len(idx) == d:
            Ug, Vg, Fg = U, V, F
        else:
            sel = xp.asarray(idx, device=dev)
            Ug, Vg, Fg = (xp.take(A, sel, axis=1) for A in (U, V, F))
        lam = aa.from_host(np.asarray([comps[r][1] for r in idx], dtype=np.float64), xp=xp,
                           device=dev)[None, :]
        FU = Fg * Ug
        groups.append((base, idx, lam, Ug, Vg, Fg, xp.concat([Fg, FU, Vg, Ug * Vg], axis=1),
                       xp.concat([Fg, FU, FU * Ug], axis=1)))
    UT = xp.stack([U[:, c] for c in range(d)], axis=0)  # row-major (d, n) in NumPy
    total = 0.0
    gv_parts, gf_parts = [], []
    for a0 in range(0, n, b):
        a1 = min(n, a0 + b)
        q = _squared_distances_t(U[a0:a1, ...], UT)
        qpos = q > 0.0
        qsafe = xp.where(qpos, q, 1.0)
        offdiag = 1.0 - xp.eye(a1 - a0, dtype=U.dtype, device=dev)
        gv = gf = None
        for base, idx, lam, Ug, Vg, Fg, R1, R2 in groups:
            m = len(idx)
            k0, k1, k2 = _radial_terms(xp, base, q, qpos, qsafe)
            Y0 = _offdiag_product(xp, k0, Vg, a0, a1, offdiag)
            Y1 = _offdiag_product(xp, k1, R1, a0, a1, offdiag)
            Y2 = _offdiag_product(xp, k2, R2, a0, a1, offdiag)
            A1F, A1FU, A1V, A1UV = (Y1[:, i * m : (i + 1) * m] for i in range(4))
            A2F, A2FU, A2FU2 = (Y2[:, i * m : (i + 1) * m] for i in range(3))
            Ua, Va, Fa = Ug[a0:a1, ...], Vg[a0:a1, ...], Fg[a0:a1, ...]
            S1 = Va * (Ua * A1F - A1FU) - Fa * (Ua * A1V - A1UV) + Fa * A1F
            S2 = Ua * Ua * A2F - 2.0 * Ua * A2FU + A2FU2
            total += c * float(xp.sum(lam * (Va * Y0 - 2.0 * S1 - 4.0 * Fa * S2)))
            if need_grad:
                g = 2.0 * c * lam
                gvg = g * (Y0 - 2.0 * Ua * A1F + 2.0 * A1FU)
                gfg = g * (2.0 * (Ua * A1V - A1UV) - 4.0 * S2 - 2.0 * A1F)
                if m == d:
                    gv, gf = gvg, gfg
                else:
                    gv = [] if gv is None else gv
                    gf = [] if gf is None else gf
                    gv.append((idx, gvg))
                    gf.append((idx, gfg))
        if need_grad:
            if isinstance(gv, list):
                gv, gf = _scatter_columns(xp, gv, d), _scatter_columns(xp, gf, d)
            gv_parts.append(gv)
            gf_parts.append(gf)
    if not need_grad:
        return total, None, None
    return total, xp.concat(gv_parts, axis=0), xp.concat(gf_parts, axis=0)


def _offdiag(xp, K, a0, a1, offdiag):
    """K (slab rows a0 .. a1 - 1 against all n) with its entries j = i set to 0 (the slab's
    square block masked; exact)."""
    parts = [K[:, :a0]] if a0 > 0 else []
    parts.append(K[:, a0:a1] * offdiag)
    if a1 < int(K.shape[1]):
        parts.append(K[:, a1:])
    return xp.concat(parts, axis=1) if len(parts) > 1 else parts[0]


def _pair_pass_full(U, V, F, comps, need_grad, block_size=None):
    """:func:`pair_pass` for a full F, one group of components per distinct base kernel.

    With Fr = F[:, :, r], z_jr = (F_j^T u_j)_r, P_r = z_ir - Fr_i . u_j, Q_r = u_i . Fr_j - z_jr,
    R_r = Fr_i . Fr_j, every sum over j != i that is linear in P, Q, R is a product of the
    masked (block x n) radial terms with (n x d^2) columns shared by all components:

        sum_j k1 Q_r       = sum_l u_il YF[l, r] - Yz_r,      YF = k1 @ F, Yz = k1 @ z
        sum_j k1 P_r v_jr  = z_ir YV_r - sum_l F_i[l, r] YUV[l, r],  YV = k1 @ V, YUV = k1 @ (u v^T)
        sum_j k1 R_r       = sum_l F_i[l, r] YF[l, r]

    and the adjoints' k1 and k0 parts likewise; only sum_j k2 P_r Q_r and the k2 Q_r part of
    dL/dF (O(n^2 d) each, O(n^2 d^2) in all) are formed component by component, from P_r and
    Q_r (two products with inner dimension d each).
    """
    xp, dev = aa.namespace(U=U)
    n, d = int(U.shape[0]), int(U.shape[1])
    c = 1.0 / (n * (n - 1))
    b = block_rows(n, block_size, xp)
    Ff = xp.reshape(F, (n, d * d))                       # [j, l d + r] = F_j[l, r]
    z = xp.sum(F * U[:, :, None], axis=1)                # z_jr = sum_l F_j[l, r] u_jl
    UV = xp.reshape(U[:, :, None] * V[:, None, :], (n, d * d))  # [j, l d + r] = u_jl v_jr
    R1 = xp.concat([Ff, UV, z, V], axis=1)
    Fcols = [F[:, :, r] for r in range(d)]
    groups = []
    for base, idx in _groups(comps):
        lam = np.zeros(d)
        lam[idx] = [comps[r][1] for r in idx]
        groups.append((base, idx, aa.from_host(lam, xp=xp, device=dev)[None, :]))
    UT = xp.stack([U[:, cc] for cc in range(d)], axis=0)
    total = 0.0
    gv_parts, gf_parts = [], []
    for a0 in range(0, n, b):
        a1 = min(n, a0 + b)
        rows = a1 - a0
        q = _squared_distances_t(U[a0:a1, ...], UT)
        qpos = q > 0.0
        qsafe = xp.where(qpos, q, 1.0)
        offdiag = 1.0 - xp.eye(rows, dtype=U.dtype, device=dev)
        Ua, Va, Fa, za = U[a0:a1, ...], V[a0:a1, ...], F[a0:a1, ...], z[a0:a1, ...]
        gv = gf = 0.0
        for base, idx, lam in groups:
            k0, k1, k2 = (_offdiag(xp, k, a0, a1, offdiag)
                          for k in _radial_terms(xp, base, q, qpos, qsafe))
            Y0 = k0 @ V
            Y1 = k1 @ R1
            YF = xp.reshape(Y1[:, : d * d], (rows, d, d))
            YUV = xp.reshape(Y1[:, d * d : 2 * d * d], (rows, d, d))
            Yz, YV = Y1[:, 2 * d * d : 2 * d * d + d], Y1[:, 2 * d * d + d :]
            K1Q = xp.sum(Ua[:, :, None] * YF, axis=1) - Yz
            T1 = Va * K1Q - (za * YV - xp.sum(Fa * YUV, axis=1)) + xp.sum(Fa * YF, axis=1)
            T2_cols, S_cols, WU_cols = [], [], []
            for r in idx:
                Fr = Fcols[r]
                P = za[:, r : r + 1] - Fr[a0:a1, ...] @ UT
                Q = Ua @ xp.permute_dims(Fr, (1, 0)) - z[None, :, r]
                W2 = k2 * Q
                T2_cols.append(xp.vecdot(W2, P, axis=-1))
                if need_grad:
                    S_cols.append(xp.sum(W2, axis=1))
                    WU_cols.append(W2 @ U)
            T2 = _scatter_columns(xp, [(idx, xp.stack(T2_cols, axis=1))], d)
            total += c * float(xp.sum(lam * (Va * Y0 - 2.0 * T1 - 4.0 * T2)))
            if need_grad:
                g = 2.0 * c * lam
                S = _scatter_columns(xp, [(idx, xp.stack(S_cols, axis=1))], d)
                WU = _scatter_columns(xp, [(idx, xp.stack(WU_cols, axis=2))], d, axis=2)
                gv = gv + g * (Y0 - 2.0 * K1Q)
                gf = gf + g[:, None, :] * (
                    2.0 * (Ua[:, :, None] * YV[:, None, :] - YUV)
                    - 4.0 * (Ua[:, :, None] * S[:, None, :] - WU) - 2.0 * YF)
        if need_grad:
            gv_parts.append(gv)
            gf_parts.append(gf)
    if not need_grad:
        return total, None, None
    return total, xp.concat(gv_parts, axis=0), xp.concat(gf_parts, axis=0)


def _scatter_columns(xp, parts, d, axis=1):
    """Columns ``idx`` (along ``axis``, the last) of each ``(idx, block)`` of ``parts`` put in
    place, zeros elsewhere: a (rows, d) or (rows, d', d) array."""
    cols = [None] * d
    zero = None
    for idx, blk in parts:
        if len(idx) == d and len(parts) == 1:
            return blk
        for i, r in enumerate(idx):
            cols[r] = blk[..., i]
            zero = xp.zeros_like(blk[..., i])
    return xp.stack([zero if col is None else col for col in cols], axis=axis)


def pair_pass(U, V, kind, F, comps, need_grad, block_size=None, vectorise=True):
    """U-statistic sum_{i != j} k0(x_i, x_j) / (n (n - 1)) in canonical form, and its adjoints.

    U: (n, d) whitened points; V: (n, d) transformed v; kind "diag" (F (n, d)) or "full"
    (F (n, d, d)); comps: per-component (base, lambda). Returns (loss, G_V, G_F).
    ``vectorise``: matrix products, one group of components per distinct base kernel
    (:func:`_pair_pass_diag`, :func:`_pair_pass_full`); False forces the per-component loop.
    """
    if vectorise:
        run = _pair_pass_diag if kind == "diag" else _pair_pass_full
        return run(U, V, F, comps, need_grad, block_size)
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
                cache[key] = _radial_terms(xp, base, q, qpos, qsafe)
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


"""The reference backend ``xp``: every operation that has an array-API form, on any namespace and
device (array_api_strict included), nothing compiled; the oracle the compiled backends are tested
against.

Its products that combine blocks (a column, K w, w^T K w, row means, coreset sums) and its
loops (Stein thinning, weighted RPCholesky) read the kernel matrix's entries through the
matrix's own backend (``K.runner("block")``), so a compiled backend that hands one of them here
still evaluates its entries itself. The serial KT loops (KT-SPLIT, KT-Swap, KT-Swap-LS),
Recombination and the weights' QP have no array-API form: their declared fallback is ``cpu``,
which runs them in C++ on one host copy.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _array_api as aa
from ..._progress import progress_bar
from ..arrays import SLAB_ENTRIES, squared_distances
from ..protocol import Backend, register
from . import dksd

__all__ = ["ReferenceBackend"]

_MOMENT_BLOCK = 1 << 18  # entries of X per block of columns in stein_moments


def _take(xp, A, i):
    return None if A is None else xp.take(A, i, axis=0)


@register
class ReferenceBackend(Backend):
    """The array-API reference (see the module docstring)."""

    name = "xp"
    compiled = False
    how = {
        "block": "array API",
        "column": "array API, from a block",
        "matvec": "array API, slabs of blocks",
        "quad": "array API, from K w",
        "row_means": "array API, slabs of blocks",
        "coreset_sums": "array API, a block each",
        "stein_thinning": "array API, a column a step",
        "weighted_rpcholesky": "array API, a column a step",
        "amd": "array API, two products with F a step",
        "lowrank": "array API",
        "median_distance": "array API, the median on the host",
        "dksd_pass": "array API, blocked",
        "stein_moments": "array API, blocks of columns; 5 d numbers to the host",
    }
    fallbacks = {"kt_split": "cpu", "kt_swap": "cpu", "kt_swap_ls": "cpu",
                 "recombination": "cpu", "simplex_weights": "cpu"}

    # ---- kernel products ------------------------------------------------------------------
    def entries(self, K, Ua, Ub, Ta=None, Tb=None, ma=None, mb=None):
        """k_P between the rows of (Ua, Ta) and of (Ub, Tb), centred by (ma, mb) when given.

        Differences are formed coordinate by coordinate (not by the |a|^2 + |b|^2 - 2ab
        expansion): near the diagonal the expansion cancels, and sqrt(q) (Matern) amplifies it.
        """
        xp = K.xp
        q = xp.zeros((Ua.shape[0], Ub.shape[0]), dtype=xp.float64, device=K.device)
        ut = None if Ta is None else xp.zeros_like(q)
        for c in range(K.d):
            du = Ua[:, c : c + 1] - Ub[:, c][None, :]
            q = q + du * du
            if Ta is not None:
                ut = ut + du * (Ta[:, c : c + 1] - Tb[:, c][None, :])
        k0, k1, qk2 = K.base.radial(xp, q)
        if Ta is None:
            out = k0
        else:
            out = k0 * (Ta @ Tb.T) - 2.0 * k1 * ut - 4.0 * qk2 - (2.0 * K.d) * k1
        if ma is not None:
            out = out + K.mean_all - ma[:, None] - mb[None, :]
        return out

    def peak_arrays(self, K) -> int:
        """(n x n') float64 arrays alive while a block is formed: q, the differences, the
        radial terms and the Stein combination."""
        return 8 if K.T is not None else 4

    def block(self, K, rows, cols=None):
        xp = K.xp
        rows = aa.as_index_array(xp, rows, K.device)
        if cols is None:
            Ub, Tb, mb = K.U, K.T, K.mean
        else:
            cols = aa.as_index_array(xp, cols, K.device)
            Ub, Tb, mb = _take(xp, K.U, cols), _take(xp, K.T, cols), _take(xp, K.mean, cols)
        return self.entries(K, _take(xp, K.U, rows), Ub, _take(xp, K.T, rows), Tb,
                            _take(xp, K.mean, rows), mb)

    def dense(self, K):
        return self.entries(K, K.U, K.U, K.T, K.T, K.mean, K.mean)

    def column(self, K, j: int):
        xp = K.xp
        rows = xp.asarray([int(j)], dtype=xp.int64, device=K.device)
        return xp.reshape(K.runner("block").block(K, rows), (K.n,))

    def matvec(self, K, w, block_size: int | None = None):
        xp = K.xp
        blocks = K.runner("block")
        parts = []
        for a, b in K.slabs(block_size):
            rows = xp.arange(a, b, dtype=xp.int64, device=K.device)
            parts.append(blocks.block(K, rows) @ w)
        return xp.concat(parts, axis=0)

    def quad(self, K, w) -> float:
        return float(K.xp.sum(w * K.matvec(w)))

    def row_means(self, K, rows):
        xp, dev = K.xp, K.device
        blocks = K.runner("block")
        ones = xp.full((K.n,), 1.0 / K.n, dtype=xp.float64, device=dev)
        b = max(1, SLAB_ENTRIES // max(K.n, 1))
        return xp.concat(
            [blocks.block(K, rows[a : a + b]) @ ones for a in range(0, rows.size, b)], axis=0
        )

    def coreset_sums(self, K, C: np.ndarray) -> np.ndarray:
        xp = K.xp  # L sums on the device, one transfer
        blocks = K.runner("block")
        return aa.to_host(xp.stack([xp.sum(blocks.block(K, c, c)) for c in C]))

    # ---- loops ----------------------------------------------------------------------------
    def stein_thinning(self, K, m: int, progress: bool = False) -> np.ndarray:
        """Alg. D.1 one kernel column per step in K's namespace, one scalar host transfer per
        step."""
        xp, n = K.xp, K.n
        blocks = K.runner("block")
        score = xp.asarray(K.diag(), copy=True)
        out = np.empty(m, dtype=np.int64)
        it = progress_bar(range(m), desc="Stein thinning", total=m) if progress else range(m)
        for t in it:
            j = xp.argmin(score)
            out[t] = int(j)
            if t + 1 < m:
                col = blocks.block(K, xp.reshape(xp.astype(j, xp.int64), (1,)))
                score = score + 2.0 * xp.reshape(col, (n,))
        return out

    def weighted_rpcholesky(self, K, w, rank: int, rows: int, u: np.ndarray, progress: bool):
        """Alg. F.1 step by step in K's namespace and on its device, the operations of
        ``engine/cpu/src_cpp/rpcholesky.cpp`` in the same order: ``(pivots, Ft, scale, sw)`` with
        F^T in
        the first rows of a zeroed (rows, n) array."""
        xp, dev, n = K.xp, K.device, K.n
        sw = xp.sqrt(xp.clip(w, 0.0, None))
        d = K.diag() * w
        d = xp.where(d > 0.0, d, 0.0)
        scale = float(xp.sum(d))
        # F^T, (rank, n) C-ordered: the first i columns of F are the contiguous rows Ft[:i], so
        # the product below reads them in place (F[:, :i] of an (n, rank) array is a strided
        # view that CuPy copies at every step, an (n, i) temporary per pivot)
        Ft = xp.zeros((rows, n), dtype=xp.float64, device=dev)
        ar = xp.arange(n, dtype=xp.int64, device=dev)
        pivots = []
        it = progress_bar(range(rank), desc="weighted RPCholesky", total=rank) if progress \
            else range(rank)
        for i in it:
            cum = xp.cumulative_sum(d)
            total = cum[-1]
            if not float(total) > 1e-14 * scale:
                break
            s = xp.searchsorted(cum, xp.reshape(total * float(u[i]), (1,)), side="right")
            s = xp.clip(s, 0, n - 1)
            col = K.runner("column").column(K, int(s[0]))
            col = col * sw * xp.take(sw, s)
            # the pivot's residual gs = K'_ss - sum_k F_sk^2 as a sequential sum (also the C++
            # column's entry s), the column scaled by the reciprocal 1 / sqrt(gs)
            if i:
                fs = xp.reshape(xp.take(Ft[:i, ...], s, axis=1), (i,))
                gs = xp.cumulative_sum(xp.concat([xp.take(col, s), -(fs * fs)]))[-1]
                g = xp.where(ar == s, gs, col - xp.matmul(fs, Ft[:i, ...]))
            else:
                g = col
                gs = xp.take(col, s)[0]
            if not float(gs) > 0.0:
                break
            f = g * (1.0 / xp.sqrt(gs))
            Ft[i, ...] = f
            d = d - f * f
            # max(d, 0) fix; the pivot's own residual is exactly zero (rounding could leave a
            # 1e-17 there and let the pivot be drawn again)
            d = xp.where((d > 0.0) & (ar != s), d, 0.0)
            pivots.append(s)
        r = len(pivots)
        piv = aa.to_host(xp.concat(pivots), np.int64) if r else np.zeros(0, dtype=np.int64)
        return piv, Ft, scale, sw

    # ---- AMD on a low-rank-plus-diagonal operator -----------------------------------------
    def lowrank_residual(self, F, diag, n_threads: int):
        """``diag - rowsum(F * F)``."""
        xp, _ = aa.namespace(F=F)
        return diag - xp.vecdot(F, F, axis=-1)

    def lowrank_quad(self, op, w, rows=None) -> float:
        """``w^T K' w`` (or ``w^T K'_JJ w`` for J = rows) of a LowRankPlusDiagonal."""
        xp, Ft, res = op.xp, op.F.T, op.residual
        if rows is not None:
            J = aa.as_index_array(xp, rows, op.device)
            Ft, res = xp.take(Ft, J, axis=1), xp.take(res, J)
        Ftw = Ft @ w
        return float(xp.sum(Ftw * Ftw) + xp.sum(res * w * w))

    def factor32(self, op):
        """``(G, e)``: ``G = float32(2^-e F)`` in F's namespace, one bounded slab at a time."""
        xp, F = op.xp, op.F
        e = op.storage_exponent()
        G = xp.empty(F.shape, dtype=xp.float32, device=op.device)
        for i0, i1 in op.row_slabs():
            G[i0:i1, ...] = xp.astype(F[i0:i1, ...] * math.ldexp(1.0, -e), xp.float32)
        return G, e

    def amd(self, op, steps: int, w0, eta: float, progress: bool, n_threads: int, track,
            check_every: int):
        """Alg. F.2 in the operator's namespace on ``op.matvec`` (of a LowRankPlusDiagonal,
        its :meth:`rounded` copy, the float32 factor the fused loops read): ``(w, steps
        run)``."""
        if hasattr(op, "rounded"):
            op = op.rounded()
        xp = op.xp
        supp = w0 > 0.0
        logv = xp.where(supp, xp.log(xp.where(supp, w0, 1.0)), -math.inf)
        v = w0
        w = w0
        it = range(1, steps + 1)
        if progress:
            it = progress_bar(it, desc="AMD", total=steps)
        for t in it:
            beta = 2.0 / (t + 1)
            z = (1.0 - beta) * w + beta * v
            logv = logv - (2.0 * t * eta) * op.matvec(z)
            logv = logv - xp.max(logv)
            e = xp.exp(logv)
            tot = xp.sum(e)
            v = e / tot
            logv = logv - xp.log(tot)
            w = (1.0 - beta) * w + beta * v
            if track is not None and (t % check_every == 0 or t == steps) and track(t, w):
                return w, t
        return w, steps

    # ---- the DKSD pass --------------------------------------------------------------------
    def dksd_pass(self, U, V, kind, F, comps, need_grad, block_size=None, n_threads: int = 1):
        """The DKSD U-statistic pass and its adjoints, blocked (:mod:`.dksd`)."""
        return dksd.pair_pass(U, V, kind, F, comps, need_grad, block_size)

    # ---- the median bandwidth -------------------------------------------------------------
    def median_pairwise_distance(self, U, n_threads: int = 1) -> float:
        """``numpy.median`` of the pairwise distances of the rows of U, in U's namespace: the
        (m, m) squared distances on U's device, the median of the upper triangle on the host.
        The definition the C++ evaluation (``engine/cpu/src_cpp/pairwise.hpp``) reproduces."""
        xp, _ = aa.namespace(U=U)
        m = U.shape[0]
        D = aa.to_host(xp.sqrt(squared_distances(xp, U, U)))
        return float(np.median(D[np.triu_indices(m, k=1)]))

    # ---- the input diagnostics ------------------------------------------------------------
    def stein_moments(self, X, S, w=None):
        """In X's namespace, in blocks of columns (bounded memory; a Ctrl-C is seen between
        blocks); 5 d numbers and three scalars leave the device."""
        xp, _ = aa.namespace(X=X, S=S, w=w)
        n, d = int(X.shape[0]), int(X.shape[1])
        w = None if w is None else xp.astype(w, xp.float64)
        parts = []
        row_trace = 0.0  # per row, sum_j (s_j - sbar_j)(x_j - xbar_j)
        step = max(1, _MOMENT_BLOCK // max(n, 1))  # columns per block
        for j in range(0, d, step):
            e = min(j + step, d)  # the array API leaves a slice past the end unspecified
            # coordinates as rows (2k x n): each moment a reduction along a contiguous row
            Z = aa.c_order(xp.concat([X[:, j:e].T, S[:, j:e].T], axis=0))
            k = e - j
            zbar = xp.mean(Z, axis=1) if w is None else xp.matmul(Z, w)
            Zc = Z - zbar[:, None]
            P = xp.concat([Zc * Zc, Zc[:k, :] * Zc[k:, :]], axis=0)
            m2 = xp.mean(P, axis=1) if w is None else xp.matmul(P, w)
            row_trace = row_trace + xp.sum(P[2 * k:, :], axis=0)
            parts.append(aa.to_host(xp.concat([zbar, m2])).reshape(5, k))
        row_trace = row_trace / d
        if w is None:
            n_eff = float(n)
            spread = float(xp.mean((row_trace - xp.mean(row_trace)) ** 2))
        else:
            w_abs = xp.abs(w)
            n_eff = float(xp.sum(w_abs)) ** 2 / float(xp.sum(w_abs * w_abs))
            spread = float(xp.matmul(w_abs, (row_trace - xp.matmul(w, row_trace)) ** 2)
                           / xp.sum(w_abs))
        return np.concatenate(parts, axis=1), spread, n_eff

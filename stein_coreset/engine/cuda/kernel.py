"""k_P and the greedy loops on one CUDA device: :class:`CudaKernel`, whose methods launch the
kernels of ``src_cuda/`` (one file per loop) and keep each loop's state on the device.

Only the ``cuda`` backend (:mod:`stein_coreset.engine.cuda`) creates one, for a
:class:`~stein_coreset.engine.KernelMatrix` on CuPy arrays, and calls its loops.
"""

from __future__ import annotations

import math

import numpy as np

from . import config
from .launch import launch_persistent, multiprocessors, persistent_grid
from .source import blocks, module

__all__ = ["CudaKernel"]


class CudaKernel:
    """k_P on n fixed points held on one CUDA device (whitened points U, scores T, centring).

    Parameters mirror :class:`~stein_coreset.engine.KernelMatrix`: ``code`` the base kernel's
    code (:data:`KNOWN_BASES`), ``sigma``, ``beta``, CuPy arrays ``U`` (n, d), ``T`` (n, d) or
    None, ``mean`` (n,) or None, and ``mean_all``.
    """

    def __init__(self, code: int, sigma: float, beta: float, U, T=None, mean=None,
                 mean_all: float = 0.0):
        import cupy

        self.cp = cupy
        self.device_id = int(U.device.id)
        with cupy.cuda.Device(self.device_id):
            self.U = cupy.ascontiguousarray(U, dtype=cupy.float64)
            self.n, self.d = int(U.shape[0]), int(U.shape[1])
            dummy = cupy.zeros(1, dtype=cupy.float64)
            self.T = dummy if T is None else cupy.ascontiguousarray(T, dtype=cupy.float64)
            self.mean = dummy if mean is None else cupy.ascontiguousarray(mean, dtype=cupy.float64)
        self._params = (
            self.U, self.T, self.mean, np.int64(self.n), np.int32(self.d), np.int32(code),
            np.int32(T is not None), np.int32(mean is not None), np.float64(sigma),
            np.float64(beta), np.float64(mean_all),
        )
        self.sms = None
        self._finite = None  # check_finite's answer, once known

    # ---- plumbing -----------------------------------------------------------------------
    def _fn(self, name: str):
        return module(self.device_id).get_function(name)

    def _dev(self):
        return self.cp.cuda.Device(self.device_id)

    def _idx(self, a):
        cp = self.cp
        if isinstance(a, cp.ndarray):
            return cp.ascontiguousarray(a, dtype=cp.int64)
        return cp.asarray(np.ascontiguousarray(a, dtype=np.int64))

    def _loop_stream(self):
        """A non-blocking stream for one greedy loop (capture is not allowed on, nor next to,
        the legacy default stream), after the device has finished the work queued before."""
        self.cp.cuda.Device(self.device_id).synchronize()
        return self.cp.cuda.Stream(non_blocking=True)

    def _run_steps(self, fn, grid, args, steps: int, stream, progress=None):
        """Launch ``fn`` ``steps`` times in order (each launch one dependent step that reads
        its state from device memory), captured as CUDA graphs of config.GRAPH_STEPS launches and
        replayed; the host waits every config.SYNC_EVERY replays, so KeyboardInterrupt and progress
        are seen there. Extra launches must be no-ops (the kernels check their step count)."""
        if steps <= 0:
            return
        g = min(steps, config.GRAPH_STEPS)
        graph = None
        with stream:
            try:
                stream.begin_capture()
                for _ in range(g):
                    fn(grid, (config.CONFIG.block,), args)
                graph = stream.end_capture()
            except Exception:  # capture unsupported: plain launches
                graph = None
                try:
                    stream.end_capture()
                except Exception:
                    pass
            done = 0
            replays = 0
            while done < steps:
                if graph is not None:
                    graph.launch(stream)
                    done += g
                else:
                    for _ in range(min(g, steps - done)):
                        fn(grid, (config.CONFIG.block,), args)
                    done += min(g, steps - done)
                replays += 1
                if replays % config.SYNC_EVERY == 0 or done >= steps:
                    stream.synchronize()
                    if progress is not None:
                        progress(min(done, steps))
        stream.synchronize()

    def check_fits(self, nbytes: float, what: str) -> None:
        """Refuse, before allocating, a buffer larger than the device memory free now (the
        driver's free bytes plus what CuPy's pool holds unused), with the estimate."""
        cp = self.cp
        with self._dev():
            free, total = cp.cuda.runtime.memGetInfo()
            pool = cp.get_default_memory_pool()
            avail = free + pool.free_bytes()
        if nbytes > avail:
            raise MemoryError(
                f"{what} needs {nbytes / 2**30:.2f} GiB of device memory; "
                f"{avail / 2**30:.2f} GiB of {total / 2**30:.1f} GiB are free on device "
                f"{self.device_id}"
            )

    # ---- dense evaluations ----------------------------------------------------------------
    def gram(self, rows, cols=None):
        """(len(rows), len(cols) or n) block on the device."""
        cp = self.cp
        with self._dev():
            r = self._idx(rows)
            c = self._idx(np.zeros(1, np.int64) if cols is None else cols)
            nr = int(r.size)
            nc = self.n if cols is None else int(c.size)
            self.check_fits(8.0 * nr * nc, f"a ({nr}, {nc}) float64 kernel block")
            out = cp.empty((nr, nc), dtype=cp.float64)
            if nr and nc:
                self._fn("kp_gram")(
                    (blocks(nr * nc),), (config.CONFIG.block,),
                    self._params + (r, np.int64(nr), c, np.int64(nc), np.int32(cols is None), out),
                )
            return out

    def diag(self):
        cp = self.cp
        with self._dev():
            out = cp.empty(self.n, dtype=cp.float64)
            self._fn("kp_diag")((blocks(self.n),), (config.CONFIG.block,), self._params + (out,))
            return out

    def _parts(self) -> int:
        """Column chunks of a product: enough blocks in flight to fill the device."""
        return max(1, min(64, math.ceil(8 * self._multiprocessors() / blocks(self.n))))

    def matvec(self, w):
        """K w for a (n,) device vector; deterministic (fixed chunks summed in order)."""
        cp = self.cp
        n = self.n
        with self._dev():
            w = cp.ascontiguousarray(w, dtype=cp.float64)
            parts = min(self._parts(), n)
            chunk = math.ceil(n / parts)
            parts = math.ceil(n / chunk)
            partial = cp.empty((parts, n), dtype=cp.float64)
            self._fn("kp_matvec_partial")(
                (blocks(n), parts), (config.CONFIG.block,),
                self._params + (w, np.int64(chunk), partial),
            )
            out = cp.empty(n, dtype=cp.float64)
            self._fn("sum_rows")(
                (blocks(n),), (config.CONFIG.block,), (partial, np.int64(parts), np.int64(n), out)
            )
            return out

    # ---- the greedy loops ---------------------------------------------------------------------
    def stein_thinning(self, m: int, progress=None) -> np.ndarray:
        """Alg. D.1 for m steps: (m,) host int64 indices in selection order, as the C++ loop
        gives them. One launch per step, the pick kept on the device."""
        self.check_finite()
        if config.loop_mode() == "persistent":
            return self._stein_thinning_persistent(int(m), progress)
        cp = self.cp
        nb = blocks(self.n)
        stream = self._loop_stream()
        with self._dev(), stream:
            score = self.diag()
            pval = cp.empty(nb, dtype=cp.float64)
            pidx = cp.empty(nb, dtype=cp.int64)
            state = cp.asarray(np.array([0, -1], dtype=np.int64))
            counter = cp.zeros(1, dtype=cp.uint32)
            out = cp.zeros(int(m), dtype=cp.int64)
            args = self._params + (score, pval, pidx, state, counter, out, np.int64(m))
            self._run_steps(self._fn("st_step"), (nb,), args, int(m), stream, progress)
            return cp.asnumpy(out)

    def _multiprocessors(self) -> int:
        if self.sms is None:
            self.sms = multiprocessors(self.device_id)
        return self.sms

    def _loop_blocks(self, work: int) -> int:
        """Blocks of a persistent argmin loop over ``work`` items (:func:`loop_blocks`)."""
        return min(config.loop_blocks(self._multiprocessors()), blocks(work))

    def _persistent_grid(self, fn, name: str, want: int) -> int:
        """``want`` blocks, at most what the device holds at once (:func:`persistent_grid`)."""
        with self._dev():
            return persistent_grid(fn, name, config.CONFIG.block, want, self.device_id)

    def _launch_persistent(self, fn, name: str, nb: int, args, stream, bar) -> None:
        launch_persistent(fn, name, nb, config.CONFIG.block, args, stream, bar, self.device_id)

    def check_finite(self) -> None:
        """Refuse points, scores or centring that are not finite, or a diagonal that
        overflowed, before an argmin loop (Stein thinning, KT-Swap, KT-Swap-LS): the kernels'
        argmin never picks a NaN, but a loop over NaNs has no meaningful pick. Checked once
        per kernel (one device synchronisation)."""
        if self._finite is None:
            cp = self.cp
            with self._dev():
                ok = (cp.isfinite(self.U).all() & cp.isfinite(self.T).all()
                      & cp.isfinite(self.mean).all() & cp.isfinite(self.diag()).all())
                self._finite = bool(ok)
        if not self._finite:
            raise ValueError("X, S: the points, scores or centring on the device hold a NaN or "
                             "an infinity (or k_P(x, x) overflowed), so the device argmin loops "
                             "have no pick; remove or rescale them")

    def _stein_thinning_persistent(self, m: int, progress=None) -> np.ndarray:
        cp = self.cp
        fn = self._fn("st_persistent")
        nb = self._persistent_grid(fn, "st_persistent", self._loop_blocks(self.n))
        stream = self._loop_stream()
        with self._dev(), stream:
            score = self.diag()
            pval = cp.empty(2 * nb, dtype=cp.float64)
            pidx = cp.empty(2 * nb, dtype=cp.int64)
            state = cp.asarray(np.array([0, -1], dtype=np.int64))
            bar = cp.zeros(2, dtype=cp.uint32)  # the grid barrier's word and its error word
            out = cp.zeros(m, dtype=cp.int64)
            per = config.PERSISTENT_STEPS
            for t1 in range(per, m + per, per):
                t1 = min(t1, m)
                self._launch_persistent(fn, "st_persistent", nb, self._params + (
                    score, pval, pidx, state, bar, out, np.int64(t1)), stream, bar)
                if progress is not None:
                    progress(t1)
            return cp.asnumpy(out)

    def weighted_rpcholesky(self, sw, d, Ft, pivots, i0: int, i1: int, u, tol: float) -> int:
        """Steps i0..i1-1 of weighted RPCholesky (Alg. F.1, engine/cpu/src_cpp/rpcholesky.cpp) on
        diag(sw) K diag(sw), in place on the device state: d (n,), Ft = F^T (rank, n) and the int64
        pivots (rank,), C-ordered CuPy arrays; u the host draws of the steps. One persistent launch,
        two grid barriers a step; the step it stopped at (i1 unless the residual vanished). Same
        pivots as the C++ unless a draw falls within rounding of a boundary of cumsum(d) (the sum of
        d is added in another order); the column's terms in the C++'s order, so the factors differ
        by the kernel entries' last bits (~1e-16)."""
        cp = self.cp
        n, rank = self.n, int(Ft.shape[0])
        i0, i1 = int(i0), int(i1)
        if rank > config.WRPC_MAX_RANK:
            raise ValueError(f"the device RPCholesky loop takes rank <= {config.WRPC_MAX_RANK}, "
                             f"got {rank}")
        if Ft.shape != (rank, n) or d.shape != (n,) or pivots.shape != (rank,):
            raise ValueError(f"need d ({n},), Ft ({rank}, {n}) and pivots ({rank},)")
        if i1 <= i0:
            return i0
        fn = self._fn("wrpc_persistent")
        nb = self._persistent_grid(fn, "wrpc_persistent",
                                   min(self._multiprocessors(), blocks(n)))
        stream = self._loop_stream()
        with self._dev(), stream:
            tsum = cp.empty(blocks(n), dtype=cp.float64)
            part = cp.empty(nb, dtype=cp.float64)
            state = cp.asarray(np.array([i1, -1], dtype=np.int64))
            bar = cp.zeros(2, dtype=cp.uint32)  # the grid barrier's word and its error word
            ud = cp.asarray(np.ascontiguousarray(np.asarray(u)[: i1 - i0], dtype=np.float64))
            self._launch_persistent(fn, "wrpc_persistent", nb, self._params + (
                sw, d, Ft, pivots, np.int64(i0), np.int64(i1), ud, np.float64(tol), tsum,
                part, state, bar), stream, bar)
            return int(cp.asnumpy(state)[0])

    def kt_split(self, idx, t: int, delta: float, uniforms) -> np.ndarray:
        """KT-SPLIT (Alg. D.2's halving, engine/cpu/src_cpp/kt_split.hpp) of the host index
        sequence idx with the given uniforms (kt_split's layout): (2^t, N >> t) host int64
        coresets."""
        cp = self.cp
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        N = int(idx.size)
        if t <= 0:
            return idx.reshape(1, N).copy()
        base_log_mult = 2.0 * math.log(2.0 * N * t / delta)
        row = N // 2
        stream = self._loop_stream()
        with self._dev(), stream:
            cur = cp.asarray(idx)
            U = cp.asarray(np.ascontiguousarray(uniforms, dtype=np.float64))
            size = N
            for j in range(t):
                ncore = 1 << j
                log_mult = base_log_mult - 2.0 * j * math.log(2.0)
                cur = self._kt_round(cur, size, ncore, U[j * row: j * row + row], log_mult,
                                     stream)
                size //= 2
            return cp.asnumpy(cur).reshape(1 << t, size)

    def kt_halvings(self, blocks, delta: float, uniforms) -> np.ndarray:
        """B independent halvings (engine/cpu/src_cpp/kt_split.hpp's kt_halvings) of the rows of the
        (B, N) host int64 blocks with the given uniforms (``_core.kt_halving_uniforms``): one
        KT-SPLIT round of B coresets side by side, (B, 2, N // 2) host int64 halves."""
        cp = self.cp
        blocks = np.ascontiguousarray(blocks, dtype=np.int64)
        B, N = blocks.shape
        half = N // 2
        log_mult = 2.0 * math.log(2.0 * N / delta)
        # a persistent round decides at most config.KTS_MAX_CORESETS coresets per step
        per = config.KTS_MAX_CORESETS if config.loop_mode() == "persistent" else B
        stream = self._loop_stream()
        out = np.empty((B, 2, half), dtype=np.int64)
        with self._dev(), stream:
            U = cp.asarray(np.ascontiguousarray(uniforms, dtype=np.float64))
            for a in range(0, B, max(per, 1)):
                b = min(B, a + per)
                nxt = self._kt_round(cp.asarray(blocks[a:b]).ravel(), N, b - a,
                                     U[a * half: b * half], log_mult, stream)
                out[a:b] = cp.asnumpy(nxt).reshape(b - a, 2, half)
        return out

    def _kt_round(self, cur, size: int, ncore: int, unif, log_mult: float, stream):
        """One KT-SPLIT round on the device: the ncore coresets of ``size`` points in cur
        (device int64, coreset l at l * size) halved side by side with the uniforms unif
        (coreset l's at l * half); returns the 2 ncore halves (left of l at 2 l half)."""
        cp = self.cp
        half = size // 2
        nxt = cp.full(2 * ncore * half, -1, dtype=cp.int64)
        acc = cp.zeros(ncore * half, dtype=cp.float64)
        if config.loop_mode() == "persistent" and ncore <= config.KTS_MAX_CORESETS:
            pfn = self._fn("kts_persistent")
            nb = self._persistent_grid(pfn, "kts_persistent", self._loop_blocks(ncore * half))
            sig2b = cp.zeros(nb * ncore, dtype=cp.float64)
            state = cp.zeros(1, dtype=cp.int64)
            bar = cp.zeros(2, dtype=cp.uint32)  # the grid barrier's word and its error word
            per = config.PERSISTENT_STEPS
            for s1 in range(per, half + per, per):
                self._launch_persistent(pfn, "kts_persistent", nb, self._params + (
                    cur, np.int64(size), np.int64(ncore), nxt, acc, sig2b, unif, state,
                    bar, np.float64(log_mult), np.int64(min(s1, half))), stream, bar)
        else:
            sig2 = cp.zeros(ncore, dtype=cp.float64)
            kst = cp.zeros(ncore, dtype=cp.int64)
            counters = cp.zeros(ncore, dtype=cp.uint32)
            args = self._params + (
                cur, np.int64(size), nxt, acc, sig2, unif, kst, counters,
                np.float64(log_mult),
            )
            self._run_steps(self._fn("kts_step"), (blocks(half), ncore), args, half, stream)
        return nxt

    def kt_swap_ls(self, dense: np.ndarray, order: np.ndarray, splx: bool) -> float:
        """KT-Swap-LS (Alg. G.2, engine/cpu/src_cpp/kt_swap_ls.cpp) on the host dense (n,) weights,
        in
        place, visiting the indices ``order``; returns w^T K w. g = K w is summed over the
        support in the C++'s order and D = w^T g added up in sequence as it does, then the
        swaps run as persistent launches of config.PERSISTENT_STEPS steps (two grid barriers a step
        that improves, one otherwise): the same swaps and weights as the C++."""
        cp = self.cp
        n = self.n
        order = np.ascontiguousarray(order, dtype=np.int64)
        supp = np.flatnonzero(dense)
        wsupp = np.ascontiguousarray(dense[supp])
        self.check_finite()
        fn = self._fn("ksls_persistent")
        nb = self._persistent_grid(fn, "ksls_persistent", self._loop_blocks(n))
        stream = self._loop_stream()
        with self._dev(), stream:
            w = cp.asarray(np.ascontiguousarray(dense, dtype=np.float64))
            g = cp.zeros(n, dtype=cp.float64)
            sd = cp.asarray(supp.astype(np.int64))
            if supp.size:
                self._fn("ksls_init")((blocks(n),), (config.CONFIG.block,), self._params + (
                    sd, cp.asarray(wsupp), np.int64(supp.size), g))
            gs = cp.asnumpy(g[sd])
            D = float(np.cumsum(wsupp * gs)[-1]) if supp.size else 0.0
            kd = self.diag()
            g2 = cp.empty(n, dtype=cp.float64)
            pval = cp.empty(2 * nb, dtype=cp.float64)
            pidx = cp.empty(2 * nb, dtype=cp.int64)
            dstate = cp.asarray(np.array([D], dtype=np.float64))
            bar = cp.zeros(2, dtype=cp.uint32)  # the grid barrier's word and its error word
            od = cp.asarray(order)
            for s0 in range(0, order.size, config.PERSISTENT_STEPS):
                s1 = min(order.size, s0 + config.PERSISTENT_STEPS)
                self._launch_persistent(fn, "ksls_persistent", nb, self._params + (
                    w, g, g2, kd, od, np.int64(s0), np.int64(s1), np.int32(bool(splx)), dstate,
                    pval, pidx, bar), stream, bar)
            dense[...] = cp.asnumpy(w)
            return float(cp.asnumpy(dstate)[0])

    def kt_swap_refine(self, I: np.ndarray, passes: int, sorted_sweeps: bool = False) -> int:
        """KT-Swap (Alg. D.3, engine/cpu/src_cpp/kt_swap.hpp) on the host int64 coreset I, in
        place; returns the number of swaps. ``sorted_sweeps``: I is sorted before every sweep (the
        sweeps then run one launch sequence each, the pending update of g carried over)."""
        cp = self.cp
        n, nb, m = self.n, blocks(self.n), int(I.size)
        passes = int(passes)
        self.check_finite()
        stream = self._loop_stream()
        with self._dev(), stream:
            if sorted_sweeps:
                I.sort()
            Id = cp.asarray(np.ascontiguousarray(I, dtype=np.int64))
            g = cp.empty(n, dtype=cp.float64)
            self._fn("kp_index_sum")((nb,), (config.CONFIG.block,),
                                     self._params + (Id, np.int64(m), g))
            dg = self.diag()
            col = cp.empty(n, dtype=cp.float64)
            pval = cp.empty(nb, dtype=cp.float64)
            pidx = cp.empty(nb, dtype=cp.int64)
            state = cp.asarray(np.array([0, -1, 0, 0, 0], dtype=np.int64))
            counter = cp.zeros(1, dtype=cp.uint32)
            fn = self._fn("kts_swap_step")
            sweeps = [passes] if not sorted_sweeps else [1] * passes
            for p, k in enumerate(sweeps):
                if p > 0:  # sort the coreset, keep g and the pending update state[1]
                    Ih = cp.asnumpy(Id)
                    Ih.sort()
                    Id.set(Ih)
                    state[0] = 0
                args = self._params + (
                    g, dg, col, Id, np.int64(m), np.int64(k), pval, pidx, state, counter,
                )
                self._run_steps(fn, (nb,), args, m * k, stream)
                if sorted_sweeps and int(cp.asnumpy(state)[4]):
                    break  # a sweep without a swap ends the loop
            I[...] = cp.asnumpy(Id)
            return int(cp.asnumpy(state)[3])

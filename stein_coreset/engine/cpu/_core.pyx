# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Thin wrapper of the C++ core: contiguous float64 / int64 memoryviews in, GIL released."""

import signal as _signal
import threading as _threading

import numpy as np

from cpython.exc cimport PyErr_CheckSignals
from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport int64_t


# ---- Ctrl-C (src_cpp/cancel.hpp) ----------------------------------------------------------------
# Each call into the C++ runs under a flag of its own (sc::call_begin / call_end), which its
# loops and its team poll every few milliseconds, unwinding with sc::Cancelled; Cython raises
# that as RuntimeError(_CANCELLED) and _Interruptible turns it into KeyboardInterrupt. Who sets a
# call's flag: on the main thread, a SIGINT hook in front of Python's handler (and it still lets
# Python record the signal), only put in place when SIGINT has Python's default handler (a
# program with its own SIGINT handler keeps its semantics: the loops then run to the end, as
# before); on any thread, cancel_scope(s) for the calls begun under the thread's scope s
# (call_scope: distributed.compress's tasks), and cancel_all(). A flag lives as long as its call:
# nothing is left set for the next one, and a Ctrl-C of one thread's call never stops another's.

_CANCELLED = "stein_coreset: cancelled (SIGINT)"
_THREAD_START = "stein_coreset: thread start: "
cdef object _getsignal = _signal.getsignal
cdef object _default_int_handler = _signal.default_int_handler
cdef object _SIGINT = _signal.SIGINT
cdef unsigned long _main_ident = <unsigned long> _threading.main_thread().ident
# the calling thread's cancellation scope (0: none) and the tests' "start the next call cancelled"
_local = _threading.local()


def set_call_scope(scope):
    """Make ``scope`` (a nonzero 63-bit int, or 0 for none) the cancellation scope of the library
    calls this thread makes from now on; returns the previous one."""
    prev = getattr(_local, "scope", 0)
    _local.scope = int(scope)
    return prev


cdef class _Interruptible:
    """``with _Interruptible(): with nogil: sc_...()`` -- the C++ call runs under a flag of its
    own: it stops within a few ms of a SIGINT (main thread) or of a cancel_scope of this
    thread's scope, and raises KeyboardInterrupt; without either nothing changes. A call begun
    under a scope already cancelled raises KeyboardInterrupt at once."""

    cdef bint hooked
    cdef int64_t handle

    def __enter__(self):
        cdef bint main = PyThread_get_thread_ident() == _main_ident
        cdef int64_t scope = getattr(_local, "scope", 0)
        cdef bint preset = getattr(_local, "preset", False)
        self.hooked = False
        self.handle = 0
        if scope != 0 and sc_scope_cancelled(scope):
            raise KeyboardInterrupt
        if preset:
            _local.preset = False
        self.handle = sc_call_begin(scope, main, preset)
        if main and _getsignal(_SIGINT) is _default_int_handler:
            self.hooked = sc_sigint_hook_install()
            if self.hooked:
                try:  # a SIGINT that came just before the hook: raise it now, not after
                    PyErr_CheckSignals()
                except BaseException:
                    sc_sigint_hook_remove()
                    self.hooked = False
                    sc_call_end(self.handle)
                    self.handle = 0
                    raise
        return self

    def __exit__(self, et, ev, tb):
        if self.hooked:
            sc_sigint_hook_remove()
            # a signal after the last poll: Python's handler raises at the next bytecode
        if self.handle:
            sc_call_end(self.handle)
            self.handle = 0
        if et is RuntimeError:
            msg = str(ev)
            if msg == _CANCELLED:
                try:
                    PyErr_CheckSignals()  # Python's handler: KeyboardInterrupt
                except BaseException as e:
                    raise e from None
                raise KeyboardInterrupt from None
            if msg.startswith(_THREAD_START):
                raise RuntimeError(
                    "n_threads: " + msg[len(_THREAD_START):] + "; a limit on threads or memory "
                    "is in force (ulimit -u, ulimit -v, a container's pids.max): pass a "
                    "smaller n_threads (n_threads=1 runs on the calling thread alone)"
                ) from None
        return False


def cancel_scope(scope):
    """Stop the C++ calls in flight that were begun under ``scope`` (on any thread; each raises
    KeyboardInterrupt there), and refuse the ones begun under it later; returns how many were
    in flight. Calls under other scopes, and the next calls of every thread, are untouched."""
    return int(sc_cancel_scope(int(scope)))


def cancel_all():
    """Stop every C++ call in flight in this process, on any thread; returns how many."""
    return int(sc_cancel_all())


def _cancel_next_call_for_tests():
    """Start this thread's next C++ call with its flag set (its loops unwind at their first
    poll), as a SIGINT would; tests only."""
    _local.preset = True


def _cancel_requested():
    """Whether a C++ call in flight has its cancellation flag set; tests only."""
    return bool(sc_any_cancel_requested())


def progress_units():
    """Work units the C++ loops have done since :func:`progress_reset` (src_cpp/progress.hpp):
    read by a progress bar's thread while a loop runs without the GIL."""
    return sc_progress_read()


def progress_reset():
    """Set the loops' progress counter to zero (before a loop whose bar reads it)."""
    sc_progress_reset()


# ---- the base kernels (engine/shared/base_kernels.inc) ------------------------------------------------

#: ``{name: code}`` of the base kernels the compiled evaluators know, from the one list
#: engine/shared/base_kernels.inc ("IMQ", "Gaussian", "Matern15", "Matern25", ...); the codes are
#: 0, 1, 2, ... in order. stein_coreset.kernels and the cuda backend read it.
BASE_KERNEL_CODES = {
    sc_base_kernels[i].name.decode("ascii"): sc_base_kernels[i].code
    for i in range(sc_num_base_kernels)
}


cdef inline int _check_base(int base) except -1:
    if base < 0 or base >= sc_num_base_kernels:
        raise ValueError(f"unknown base kernel code {base}")
    return 0


cdef class Kernel:
    """Host-side handle on a P-mean-zero kernel over n whitened points (see stein_kernel.hpp).

    Parameters
    ----------
    base : int
        A code of :data:`BASE_KERNEL_CODES` (0 IMQ, 1 Gaussian, 2 Matern(1.5), 3 Matern(2.5)).
    U : (n, d) float64, whitened points L^{-1} x.
    T : (n, d) float64 or None, whitened scores L^T s (None: base kernel, no Stein part).
    mean : (n,) float64 or None, centring vector; mean_all its constant.

    The structure-of-arrays copies of U and T that every evaluation reads (src_cpp/soa_kernel.hpp)
    are made here, once, and live as long as the handle.

    Every function below that evaluates the kernel takes ``n_threads`` (default 1): the size of
    the team of that one call (src_cpp/parallel.hpp). No process-wide state is read or changed.
    """

    def __init__(self, int base, double sigma, double beta, const double[:, ::1] U,
                 T=None, mean=None, double mean_all=0.0):
        cdef const double[:, ::1] Tv
        cdef const double[::1] mv
        cdef const double[:, ::1] Us
        _check_base(base)
        self._keep = [U]
        self.spec.base = base
        self.spec.sigma = sigma
        self.spec.beta = beta
        self.spec.n = U.shape[0]
        self.spec.d = U.shape[1]
        self.spec.U = &U[0, 0]
        self.spec.T = NULL
        self.spec.mean = NULL
        self.spec.mean_all = mean_all
        if T is not None:
            Tv = T
            if Tv.shape[0] != U.shape[0] or Tv.shape[1] != U.shape[1]:
                raise ValueError("T must have the shape of U")
            self._keep.append(T)
            self.spec.T = &Tv[0, 0]
        if mean is not None:
            mv = mean
            if mv.shape[0] != U.shape[0]:
                raise ValueError("mean must have one entry per point")
            self._keep.append(mean)
            self.spec.mean = &mv[0]
        # the structure-of-arrays layout, built once (coordinate c of point i at [c, i]), its
        # rows padded to sc::soa_capacity(n)
        self.spec.Us = NULL
        self.spec.Ts = NULL
        self.spec.scap = 0
        cdef int64_t n = U.shape[0]
        cdef int64_t cap = sc_soa_capacity(n)
        if U.shape[0] > 0 and U.shape[1] > 0:
            self._soa_U = np.zeros((U.shape[1], cap))
            self._soa_U[:, :n] = np.asarray(U).T
            Us = self._soa_U
            self.spec.Us = &Us[0, 0]
            self.spec.scap = cap
            if T is not None:
                self._soa_T = np.zeros((U.shape[1], cap))
                self._soa_T[:, :n] = np.asarray(T).T
                Us = self._soa_T
                self.spec.Ts = &Us[0, 0]

    @property
    def n(self):
        return self.spec.n

    @property
    def d(self):
        return self.spec.d


def omp_max_threads():
    """omp_get_max_threads() of the calling thread (OMP_NUM_THREADS, threadpoolctl limits);
    0 in a build without OpenMP."""
    return sc_omp_max_threads()


def _team_members(int nt, double step_ns, int64_t nchunks, int64_t nsteps=1):
    """The members a region of ``nsteps`` steps of ``step_ns`` single-thread ns each (``nchunks``
    chunks a step) runs on, out of a team of ``nt`` (parallel.hpp's cost model); tests only."""
    return sc_team_members(nt, step_ns, nchunks, nsteps)


def _team_probe_step_ns(int members, int64_t nsteps=20000, int64_t chunk_units=2000):
    """Wall ns a step of a region on ``members`` awake threads costs beyond its work divided
    among them (the barrier); each step has ``members`` chunks of ~``chunk_units`` ns."""
    cdef double r
    with nogil:
        r = sc_team_probe_step_ns(members, nsteps, chunk_units)
    return r


def _team_probe_wake_ns(int members, int reps=20):
    """Wall ns of an empty one-off loop on ``members`` threads whose workers were asleep."""
    cdef double r
    with nogil:
        r = sc_team_probe_wake_ns(members, reps)
    return r


def _team_stats(enable=None):
    """The region accounting of parallel.hpp (tools/threads_table.py --profile): the totals
    since the last call, one dict per (site, loop, team, members, nested), and reset; then, if
    ``enable`` is not None, switch the accounting on or off (off by default)."""
    cdef vector[SiteStats] v = sc_team_stats_take()
    cdef size_t i
    out = []
    for i in range(v.size()):
        out.append({"site": v[i].site.decode("utf-8", "replace"), "loop": bool(v[i].loop),
                    "team": v[i].team,
                    "members": v[i].members, "nested": bool(v[i].nested),
                    "regions": v[i].s.regions, "steps": v[i].s.steps, "chunks": v[i].s.chunks,
                    "wall_s": v[i].s.wall_ns * 1e-9, "busy_s": v[i].s.busy_ns * 1e-9,
                    "combine_s": v[i].s.combine_ns * 1e-9})
    if enable is not None:
        sc_team_stats_enable(bool(enable))
    return out


def gram(Kernel K, const int64_t[::1] rows, cols=None, int n_threads=1):
    """(len(rows), len(cols) or n) block of the kernel matrix."""
    cdef const int64_t[::1] cv
    cdef int64_t nr = rows.shape[0], nc, i
    cdef const int64_t* cptr = NULL
    for i in range(nr):
        if rows[i] < 0 or rows[i] >= K.spec.n:
            raise IndexError(f"row index {rows[i]} out of range for n = {K.spec.n}")
    if cols is None:
        nc = K.spec.n
    else:
        cv = cols
        nc = cv.shape[0]
        for i in range(nc):
            if cv[i] < 0 or cv[i] >= K.spec.n:
                raise IndexError(f"column index {cv[i]} out of range for n = {K.spec.n}")
        if nc > 0:
            cptr = &cv[0]
    out = np.empty((nr, nc), dtype=np.float64)
    cdef double[:, ::1] ov = out
    if nr == 0 or nc == 0:
        return out
    with _Interruptible():
        with nogil:
            sc_gram(K.spec, &rows[0], nr, cptr, nc, &ov[0, 0], n_threads)
    return out


def recombination(const double[:, ::1] A, const double[::1] x0, bint points_major=False,
                  int n_threads=1):
    """x >= 0 with A x = A x0 and at most rank(A) <= m nonzeros (Alg. G.1).

    A is (m, n), or (n, m) holding A^T when ``points_major`` (no transpose copy needed).
    """
    cdef int64_t m = A.shape[1] if points_major else A.shape[0]
    cdef int64_t n = A.shape[0] if points_major else A.shape[1]
    cdef int64_t rs = 1 if points_major else n
    cdef int64_t cs = m if points_major else 1
    if x0.shape[0] != n:
        raise ValueError(f"x0 must have length n = {n}, got {x0.shape[0]}")
    out = np.zeros(n, dtype=np.float64)
    cdef double[::1] ov = out
    if n == 0:
        return out
    cdef const double* aptr = &A[0, 0] if m > 0 else NULL
    with _Interruptible():
        with nogil:
            sc_recombination_strided(aptr, m, n, rs, cs, &x0[0], &ov[0], n_threads)
    return out


def simplex_qp(const double[:, ::1] K, const double[::1] w0, int64_t max_iter):
    """argmin over the simplex of w^T K w from w0 (src_cpp/simplex_qp.hpp): (w, steps), or
    (None, -1) when a free set needs the eigendecomposition fallback."""
    cdef int64_t p = K.shape[0], steps
    if K.shape[1] != p or w0.shape[0] != p or p == 0:
        raise ValueError(f"K must be square and match w0, got {K.shape[0]}x{K.shape[1]}, "
                         f"{w0.shape[0]}")
    out = np.zeros(p, dtype=np.float64)
    cdef double[::1] ov = out
    with _Interruptible():
        with nogil:
            steps = sc_simplex_qp(&K[0, 0], p, &w0[0], max_iter, &ov[0])
    return (None, -1) if steps < 0 else (out, steps)


def affine_weights(const double[:, ::1] K):
    """argmin_{1^T w = 1} w^T K w through the scaled Cholesky factor of src_cpp/simplex_qp.hpp,
    or None when it needs the eigendecomposition fallback."""
    cdef int64_t p = K.shape[0]
    cdef bint ok
    if K.shape[1] != p or p == 0:
        raise ValueError(f"K must be square and non-empty, got {K.shape[0]}x{K.shape[1]}")
    out = np.zeros(p, dtype=np.float64)
    cdef double[::1] ov = out
    with _Interruptible():
        with nogil:
            ok = sc_affine_weights(&K[0, 0], p, &ov[0])
    return out if ok else None


def kt_swap_ls(Kernel K, double[::1] w, const int64_t[::1] order, int fmt, int n_threads=1):
    """KT-Swap-LS (Alg. G.2) in place on the dense weights w; returns the tracked w^T K w."""
    cdef int64_t s = order.shape[0], i
    cdef double D
    if w.shape[0] != K.spec.n:
        raise ValueError(f"w must have length n = {K.spec.n}")
    if fmt != 0 and fmt != 1:
        raise ValueError("fmt must be 0 (simplex) or 1 (constant-preserving)")
    for i in range(s):
        if order[i] < 0 or order[i] >= K.spec.n:
            raise IndexError(f"index {order[i]} out of range for n = {K.spec.n}")
    if s == 0:
        return float(np.dot(w, matvec_soa(K, w, n_threads)))
    with _Interruptible():
        with nogil:
            D = sc_kt_swap_ls(K.spec, &w[0], &order[0], s, fmt, n_threads)
    return D


# ---- equal-weighted compression: Stein thinning, KT-SPLIT, KT-Swap (src_cpp/stein_thinning,
# kt_split, kt_swap) ---------------------------------------------------------------------------

cdef _check_indices(Kernel K, const int64_t[::1] idx, str name):
    cdef int64_t i
    for i in range(idx.shape[0]):
        if idx[i] < 0 or idx[i] >= K.spec.n:
            raise IndexError(f"{name} index {idx[i]} out of range for n = {K.spec.n}")


def kernel_column(Kernel K, int64_t j, int n_threads=1):
    """(n,) column k_P(x_i, x_j)."""
    if j < 0 or j >= K.spec.n:
        raise IndexError(f"column index {j} out of range for n = {K.spec.n}")
    out = np.empty(K.spec.n, dtype=np.float64)
    cdef double[::1] ov = out
    with _Interruptible():
        with nogil:
            sc_kernel_column(K.spec, j, &ov[0], n_threads)
    return out


def _column_cache_bytes(int64_t n, int64_t m, int64_t d):
    """The column cache Stein thinning gives a run of m steps on n points in d dimensions."""
    return sc_column_cache_bytes(n, m, d)


def stein_thinning(Kernel K, int64_t m, int n_threads=1, double cache_bytes=-1.0):
    """Greedy Stein thinning (Alg. D.1): (m,) int64 indices in selection order. Repeated picks
    read their column from a cache of at most ``cache_bytes`` (negative: the run's own size,
    none below d = 8, at most 256 MiB: stein_thinning.hpp's column_cache_bytes)."""
    if m < 1:
        raise ValueError("m must be >= 1")
    out = np.empty(m, dtype=np.int64)
    cdef int64_t[::1] ov = out
    with _Interruptible():
        with nogil:
            sc_stein_thinning(K.spec, m, &ov[0], NULL, n_threads, cache_bytes)
    return out


def kt_split(Kernel K, const int64_t[::1] idx, int t, double delta, uint64_t seed,
             uniforms=None, int n_threads=1):
    """KT-SPLIT of the index sequence idx: (2^t, size) int64 array of coresets."""
    cdef int64_t N = idx.shape[0]
    cdef const double[::1] uv
    cdef const double* uptr = NULL
    if t < 0 or t > 40:
        raise ValueError("t must be in [0, 40]")
    _check_indices(K, idx, "idx")
    cdef int64_t size = sc_kt_split_size(N, t)
    if size < 1:
        raise ValueError(f"{N} indices cannot be halved {t} times")
    if uniforms is not None:
        uv = uniforms
        if uv.shape[0] < t * (N // 2):
            raise ValueError("uniforms must hold t * (N // 2) values")
        uptr = &uv[0]
    out = np.empty(((<int64_t> 1) << t, size), dtype=np.int64)
    cdef int64_t[:, ::1] ov = out
    with _Interruptible():
        with nogil:
            sc_kt_split(K.spec, &idx[0], N, t, delta, seed, uptr, &ov[0, 0], n_threads)
    return out


def kt_halvings(Kernel K, const int64_t[:, ::1] blocks, double delta, const uint64_t[::1] seeds,
                int n_threads=1):
    """B independent KT-SPLIT halvings (t = 1) of the rows of the (B, N) blocks, row l from
    seeds[l] as kt_split(K, blocks[l], 1, delta, seeds[l]): (B, 2, N // 2) int64 halves."""
    cdef int64_t B = blocks.shape[0], N = blocks.shape[1], l
    if seeds.shape[0] != B:
        raise ValueError(f"need one seed per block: {B} blocks, {seeds.shape[0]} seeds")
    if N < 2:
        raise ValueError(f"a block of {N} indices cannot be halved")
    for l in range(B):
        _check_indices(K, blocks[l], "blocks")
    out = np.empty((B, 2, N // 2), dtype=np.int64)
    cdef int64_t[:, :, ::1] ov = out
    if B:
        with _Interruptible():
            with nogil:
                sc_kt_halvings(K.spec, &blocks[0, 0], B, N, delta, &seeds[0], &ov[0, 0, 0],
                               n_threads)
    return out


def kt_halving_uniforms(int64_t N, const uint64_t[::1] seeds):
    """The (B * (N // 2),) uniforms of kt_halvings' rows, row l's from seeds[l] (each
    kt_split_uniforms(N, 1, seeds[l])), one row after another."""
    cdef int64_t B = seeds.shape[0], half = N // 2, l
    out = np.empty(B * half, dtype=np.float64)
    cdef double[::1] ov = out
    if out.size:
        with nogil:
            for l in range(B):
                sc_kt_split_uniforms(N, 1, seeds[l], &ov[l * half])
    return out


def _kt_split_round_modes(int64_t N, int t, int64_t d, int n_threads):
    """For each of KT-SPLIT's t rounds on N points: True where its halvings run together pair
    by pair on the team, False where each runs whole on one member (tests)."""
    out = []
    cdef int64_t size = N
    for j in range(t):
        out.append(bool(sc_kt_split_pairs_together(max(n_threads, 1), 1 << j, size // 2, d)))
        size //= 2
    return out


def kt_split_uniforms(int64_t N, int t, uint64_t seed):
    """The (t * (N // 2),) uniforms kt_split draws from ``seed`` (its ``uniforms`` layout)."""
    if t < 0 or t > 40 or N < 0:
        raise ValueError("t must be in [0, 40] and N >= 0")
    out = np.empty(t * (N // 2), dtype=np.float64)
    cdef double[::1] ov = out
    if out.size:
        with nogil:
            sc_kt_split_uniforms(N, t, seed, &ov[0])
    return out


def coreset_sums(Kernel K, const int64_t[:, ::1] C, int n_threads=1):
    """(L,) sums sum_{a,b} k_P(C[l, a], C[l, b]) of L equal-size coresets."""
    cdef int64_t L = C.shape[0], m = C.shape[1], l, a
    for l in range(L):
        for a in range(m):
            if C[l, a] < 0 or C[l, a] >= K.spec.n:
                raise IndexError(f"coreset index {C[l, a]} out of range for n = {K.spec.n}")
    out = np.zeros(L, dtype=np.float64)
    cdef double[::1] ov = out
    if L == 0 or m == 0:
        return out
    with _Interruptible():
        with nogil:
            sc_coreset_sums(K.spec, &C[0, 0], L, m, &ov[0], n_threads)
    return out


def kt_swap_refine(Kernel K, int64_t[::1] I, int passes=1, int n_threads=1,
                   bint sorted_sweeps=False):
    """Greedy KT-Swap (Alg. D.3) on the coreset I, in place (sorted before every sweep when
    sorted_sweeps); returns the number of swaps."""
    cdef int64_t m = I.shape[0], changed
    if m < 1:
        raise ValueError("the coreset is empty")
    _check_indices(K, I, "coreset")
    with _Interruptible():
        with nogil:
            changed = sc_kt_swap_refine(K.spec, &I[0], m, passes, n_threads, sorted_sweeps)
    return changed


def matvec_slots(int64_t n):
    """The accumulators of matvec_soa's upper-triangle product at n points (each n doubles),
    or 0 where they would pass its memory bound and the product goes row by row."""
    return sc_soa_matvec_slots(n)


def matvec_soa(Kernel K, const double[::1] w, int n_threads=1, symmetric=None):
    """K w over all n points, with the vectorised structure-of-arrays evaluator (K never formed):
    from the upper triangle (half the evaluations) where ``symmetric`` is True, or None and
    the accumulators fit (sc::soa_matvec_slots), else row by row. Independent of n_threads."""
    if w.shape[0] != K.spec.n:
        raise ValueError(f"w must have length n = {K.spec.n}")
    out = np.empty(K.spec.n, dtype=np.float64)
    if K.spec.n == 0:
        return out
    cdef double[::1] ov = out
    cdef bint sym = (matvec_slots(K.spec.n) > 0) if symmetric is None else bool(symmetric)
    with _Interruptible():
        with nogil:
            if sym:
                sc_soa_matvec_sym(K.spec, &w[0], &ov[0], n_threads)
            else:
                sc_soa_matvec(K.spec, &w[0], &ov[0], n_threads)
    return out


def quad_soa(Kernel K, const double[::1] w, int n_threads=1):
    """w^T K w over all n points from K's upper triangle (half the evaluations of a product),
    summed in fixed row chunks: independent of n_threads."""
    if w.shape[0] != K.spec.n:
        raise ValueError(f"w must have length n = {K.spec.n}")
    if K.spec.n == 0:
        return 0.0
    cdef double out
    with _Interruptible():
        with nogil:
            out = sc_soa_quad(K.spec, &w[0], n_threads)
    return out


# AMD on F F^T + diag(res) (Low-rank Debiasing's weights) ----------------------------------------

def amd_lowrank(const float[:, ::1] F, const double[::1] res, double[::1] w, double[::1] v,
                int64_t t0, int64_t steps, double eta, int n_threads=1):
    """AMD steps t0+1..t0+steps (Alg. F.2) on F F^T + diag(res); state (w, v) updated in place.

    F is float32 (the pass over it is memory-bound; products accumulate in double)."""
    cdef int64_t n = F.shape[0], r = F.shape[1]
    if res.shape[0] != n or w.shape[0] != n or v.shape[0] != n:
        raise ValueError(f"res, w and v must have length n = {n}")
    if t0 < 0 or steps < 0:
        raise ValueError("t0 and steps must be >= 0")
    if n == 0 or steps == 0:
        return
    cdef const float* Fp = NULL
    if r > 0:
        Fp = &F[0, 0]
    with _Interruptible():
        with nogil:
            sc_amd_lowrank(Fp, &res[0], n, r, t0, steps, eta, &w[0], &v[0], n_threads)


def lowrank_residual(const double[:, :] F, const double[::1] diag, int n_threads=1):
    """``diag - rowsum(F * F)``, each row summed in increasing column order (independent of
    n_threads); F may have any strides."""
    cdef int64_t n = F.shape[0], r = F.shape[1]
    if diag.shape[0] != n:
        raise ValueError(f"diag must have length n = {n}")
    res = np.empty(n, dtype=np.float64)
    cdef double[::1] rv = res
    if n == 0:
        return res
    if r == 0:
        rv[:] = diag
        return res
    with _Interruptible():
        with nogil:
            sc_lowrank_residual(&F[0, 0], F.strides[0] // sizeof(double),
                                F.strides[1] // sizeof(double), n, r, &diag[0], &rv[0],
                                n_threads)
    return res


def factor32(const double[:, :] F, int n_threads=1):
    """``(G, e)``: ``G = float32(2^-e F)`` C-ordered and ``e`` the frexp exponent of max|F| (0
    for a zero, empty or non-finite F), as NumPy's multiply-and-cast gives them; F may have any
    strides. Independent of n_threads."""
    cdef int64_t n = F.shape[0], r = F.shape[1]
    G = np.empty((n, r), dtype=np.float32)
    cdef float[:, ::1] Gv = G
    cdef int64_t si = F.strides[0] // sizeof(double), sk = F.strides[1] // sizeof(double)
    cdef int e = 0
    if n == 0 or r == 0:
        return G, 0
    with _Interruptible():
        with nogil:
            e = sc_factor32(&F[0, 0], si, sk, n, r, &Gv[0, 0], n_threads)
    return G, e


def lowrank_quad(const double[:, :] F, const double[::1] res, const double[::1] c, idx=None,
                 int n_threads=1):
    """``c^T K'_JJ c`` for K' = F F^T + diag(res) and the rows J = idx (all rows when None):
    ``|F_J^T c|^2 + sum res_J c^2``, summed in fixed chunks (independent of n_threads). F may
    have any strides (the transpose of a C-ordered factor needs no copy)."""
    cdef int64_t n = F.shape[0], r = F.shape[1]
    cdef const int64_t[::1] J
    cdef const int64_t* Jp = NULL
    cdef int64_t m = n
    if res.shape[0] != n:
        raise ValueError(f"res must have length n = {n}")
    if idx is not None:
        J = np.ascontiguousarray(idx, dtype=np.int64)
        m = J.shape[0]
        if m and (np.min(J) < 0 or np.max(J) >= n):
            raise ValueError(f"idx must lie in [0, {n})")
        if m:
            Jp = &J[0]
    if c.shape[0] != m:
        raise ValueError(f"c must have length {m}")
    if m == 0:
        return 0.0
    cdef const double* Fp = NULL
    cdef int64_t si = F.strides[0] // sizeof(double), sk = F.strides[1] // sizeof(double)
    if r > 0:
        Fp = &F[0, 0]
    cdef double out
    with _Interruptible():
        with nogil:
            out = sc_lowrank_quad(Fp, si, sk, &res[0], n, r, &c[0], Jp, m, n_threads)
    return out


def weighted_rpcholesky(Kernel K, const double[::1] sw, double[::1] d, double[:, ::1] Ft,
                         int64_t[::1] pivots, int64_t i0, int64_t i1, const double[::1] u,
                         double tol, int n_threads=1):
    """Steps i0..i1-1 of weighted RPCholesky (Alg. F.1) on diag(sw) K diag(sw); the state
    (d, Ft = F^T of shape (rank, n), pivots) is updated in place. Returns the step it stopped
    at (i1 unless the residual vanished)."""
    cdef int64_t n = K.spec.n, rank = Ft.shape[0]
    if sw.shape[0] != n or d.shape[0] != n or Ft.shape[1] != n:
        raise ValueError(f"sw, d and the rows of Ft must have length n = {n}")
    if pivots.shape[0] != rank:
        raise ValueError(f"pivots must have length rank = {rank}")
    if i0 < 0 or i1 < i0 or i1 > rank or u.shape[0] < i1 - i0:
        raise ValueError("need 0 <= i0 <= i1 <= rank and len(u) >= i1 - i0")
    if n == 0 or i1 == i0:
        return i0
    cdef int64_t out
    with _Interruptible():
        with nogil:
            out = sc_weighted_rpcholesky(K.spec, &sw[0], &d[0], &Ft[0, 0], rank, &pivots[0], i0, i1,
                                         &u[0], tol, n_threads)
    return out


def kernel_row_means(Kernel K, const int64_t[::1] rows, int n_threads=1):
    """(len(rows),) means (1/n) sum_j k(x_rows[a], x_j) over all n points of K."""
    cdef int64_t nr = rows.shape[0], i
    for i in range(nr):
        if rows[i] < 0 or rows[i] >= K.spec.n:
            raise IndexError(f"row index {rows[i]} out of range for n = {K.spec.n}")
    out = np.empty(nr, dtype=np.float64)
    cdef double[::1] ov = out
    if nr == 0:
        return out
    with _Interruptible():
        with nogil:
            sc_kernel_row_means(K.spec, &rows[0], nr, &ov[0], n_threads)
    return out


def dksd_pass(const double[:, ::1] U, const double[:, ::1] V, const double[::1] F, bint full,
              const int[::1] base, const double[::1] sigma, const double[::1] beta,
              const double[::1] lam, bint need_grad, int n_threads=1):
    """DKSD U-statistic and its adjoints (src_cpp/dksd.hpp); F is the flattened diffusion."""
    cdef int64_t n = U.shape[0], d = U.shape[1]
    cdef int64_t fsize = n * d * d if full else n * d
    cdef DKSDSpec S
    cdef double total
    cdef double* gvp = NULL
    cdef double* gfp = NULL
    cdef double[:, ::1] gvv
    cdef double[::1] gfv
    if n < 2:
        raise ValueError("dksd_pass needs at least 2 points")
    if V.shape[0] != n or V.shape[1] != d:
        raise ValueError("V must have the shape of U")
    if F.shape[0] != fsize:
        raise ValueError(f"F must have {fsize} entries, got {F.shape[0]}")
    if base.shape[0] != d or sigma.shape[0] != d or beta.shape[0] != d or lam.shape[0] != d:
        raise ValueError("base, sigma, beta and lam need one entry per coordinate")
    for i in range(d):
        _check_base(base[i])
    Gv = Gf = None
    if need_grad:
        Gv = np.empty((n, d), dtype=np.float64)
        Gf = np.empty(fsize, dtype=np.float64)
        gvv = Gv
        gfv = Gf
        gvp = &gvv[0, 0]
        gfp = &gfv[0]
    S.n = n
    S.d = d
    S.U = &U[0, 0]
    S.V = &V[0, 0]
    S.F = &F[0]
    S.full = full
    S.base = &base[0]
    S.sigma = &sigma[0]
    S.beta = &beta[0]
    S.lam = &lam[0]
    with _Interruptible():
        with nogil:
            total = sc_dksd_pass(S, gvp, gfp, n_threads)
    if need_grad:
        Gf = Gf.reshape((int(n), int(d), int(d))) if full else Gf.reshape((int(n), int(d)))
    return total, Gv, Gf



def pairwise_sq_distances(const double[:, ::1] U, int n_threads=1):
    """(m (m - 1) / 2,) squared distances of the pairs i < j of the rows of U, packed by rows,
    summed coordinate by coordinate (bit for bit ``engine.squared_distances``); see
    src_cpp/pairwise.hpp."""
    cdef int64_t m = U.shape[0], d = U.shape[1]
    out = np.empty(m * (m - 1) // 2 if m > 1 else 0, dtype=np.float64)
    cdef double[::1] ov = out
    if m < 2:
        return out
    with _Interruptible():
        with nogil:
            sc_pairwise_sq_distances(&U[0, 0], m, d, &ov[0], n_threads)
    return out


def median_pairwise_distance(const double[:, ::1] U, int n_threads=1, int select=0):
    """``numpy.median`` of the pairwise Euclidean distances of the rows of U (at least two),
    exactly. ``select`` (tests): 0 bracketing (default), 1 one ``std::nth_element`` over every
    pair, 2 bracketing forced to miss, so that its fallback answers."""
    cdef int64_t m = U.shape[0], d = U.shape[1]
    cdef double med
    if m < 2:
        raise ValueError("median_pairwise_distance needs at least two points")
    if select < 0 or select > 2:
        raise ValueError(f"unknown select {select}")
    with _Interruptible():
        with nogil:
            med = sc_median_pairwise_distance(&U[0, 0], m, d, n_threads, select)
    return med


def score_field_rows(const double[:, ::1] X, const double[:, ::1] S, int64_t no_prev):
    """Of the first k of the 2k rows of X and S (the last k: the row before each), the rows kept
    (those that differ from the previous one) and the counts ``(repeats, conflicts)`` (see
    src_cpp/score_field.hpp): ``(keep, repeats, conflicts)``."""
    cdef int64_t k = X.shape[0] // 2, d = X.shape[1], m
    if X.shape[0] != 2 * k or k < 1 or S.shape[0] != X.shape[0] or S.shape[1] != d or d < 1:
        raise ValueError("X and S must be two same-shaped blocks of k rows each")
    keep = np.empty(k, dtype=np.int64)
    counts = np.zeros(2, dtype=np.int64)
    cdef int64_t[::1] kv = keep
    cdef int64_t[::1] cv = counts
    with nogil:
        m = sc_score_field_rows(&X[0, 0], &S[0, 0], k, d, no_prev, &kv[0], &cv[0])
    return keep[:m], int(counts[0]), int(counts[1])


def score_field_figures(const double[:, ::1] X, const double[:, ::1] S, const int64_t[::1] keep,
                        const int64_t[::1] q, const int64_t[:, ::1] part, bint whiten):
    """The nearest-neighbour score-field figures of the rows ``keep`` of X and S (distinct
    points; see src_cpp/score_field.hpp): ``(nn, closer, pairs, sign)``, nn the nearest other
    kept row of each query q[i] (an index into keep), the last three the counts the test's
    ``nn_rank`` and ``nn_sign`` divide."""
    cdef int64_t m = keep.shape[0], d = X.shape[1], nq = q.shape[0], K = part.shape[1], i
    if S.shape[0] != X.shape[0] or S.shape[1] != d:
        raise ValueError("X and S must have the same shape")
    if part.shape[0] != nq:
        raise ValueError("part must have one row per query")
    if m < 2 or d < 1:
        raise ValueError("score_field_figures needs at least two rows and one column")
    for i in range(m):
        if keep[i] < 0 or keep[i] >= X.shape[0]:
            raise ValueError("a kept row is out of range")
    for i in range(nq):
        if q[i] < 0 or q[i] >= m:
            raise ValueError("a query row is out of range")
    for i in range(nq * K):
        if part[i // K, i % K] < 0 or part[i // K, i % K] >= m:
            raise ValueError("a partner row is out of range")
    nn = np.empty(nq, dtype=np.int64)
    figures = np.empty(3, dtype=np.float64)
    cdef int64_t[::1] nv = nn
    cdef double[::1] fv = figures
    cdef const int64_t* pp = &part[0, 0] if nq * K > 0 else NULL
    cdef const int64_t* qp = &q[0] if nq > 0 else NULL
    cdef int64_t* np_ = &nv[0] if nq > 0 else NULL
    with _Interruptible():
        with nogil:
            sc_score_field_figures(&X[0, 0], &S[0, 0], &keep[0], m, d, qp, nq, pp, K, whiten,
                                   np_, &fv[0])
    return nn, float(figures[0]), int(figures[1]), float(figures[2])


def stein_moments(const double[:, ::1] X, const double[:, ::1] S, w):
    """The per-coordinate moments of Stein's identity of the rows of X and S, weighted by w (a
    float64 vector, or None for uniform weights; see src_cpp/stein_moments.hpp): ``(moments,
    spread, n_eff)``, moments the (5, d) rows xbar, sbar, var_x, var_s, cov."""
    cdef int64_t n = X.shape[0], d = X.shape[1]
    cdef const double[::1] wv
    cdef const double* wp = NULL
    if S.shape[0] != n or S.shape[1] != d:
        raise ValueError("X and S must have the same shape")
    if n < 1 or d < 1:
        raise ValueError("stein_moments needs at least one row and one column")
    if w is not None:
        wv = w
        if wv.shape[0] != n:
            raise ValueError("w must have one weight per row")
        wp = &wv[0]
    moments = np.empty((5, d), dtype=np.float64)
    out = np.empty(2, dtype=np.float64)
    cdef double[:, ::1] mv = moments
    cdef double[::1] ov = out
    with _Interruptible():
        with nogil:
            sc_stein_moments(&X[0, 0], &S[0, 0], wp, n, d, &mv[0, 0], &ov[0])
    return moments, float(out[0]), float(out[1])

"""The Cython bridge of the ``cpu`` backend: the C++ of ``src_cpp/`` (through ``_core``), called on
host arrays. The one module of the package that imports ``_core``.

The ``cpu`` backend (:mod:`stein_coreset.engine.cpu`) runs its operations here, the ``cuda``
backend draws KT-SPLIT's uniforms here (the C++ random streams, so both split alike), and
:mod:`stein_coreset._threads` reads the OpenMP limit and scopes and cancels calls here. Each
function that takes a kernel matrix reads its cached ``_core.Kernel``
handle (:func:`handle`) and its ``n_threads``; the others take ``n_threads`` (already an int,
:func:`stein_coreset._threads.effective_n_threads`). Every parallel loop runs on a team of that
size owned by the call (src_cpp/parallel.hpp); results do not depend on it.
"""

from __future__ import annotations

import numpy as np

from ... import _array_api as aa
from ..._progress import polled
from ..dispatch import COMPILED_KERNELS, is_compiled_kernel

try:
    from . import _core
except ImportError as e:  # pragma: no cover - only hit when importing an unbuilt source tree
    raise ImportError(
        "stein_coreset's compiled extension (engine/cpu/_core) is missing: this is the source "
        "tree, not an installed package. Install it with `pip install .` and run from another "
        "directory, or run the tests with `python -m pytest` (tests/conftest.py imports the "
        "installed copy)."
    ) from e

__all__ = [
    "BASE_KERNEL_CODES",
    "handle",
    "gram",
    "matvec",
    "quad",
    "column",
    "row_means",
    "coreset_sums",
    "stein_thinning",
    "kt_split_units",
    "kt_split",
    "kt_split_uniforms",
    "kt_halving_uniforms",
    "kt_halvings",
    "kt_swap_refine",
    "kt_swap_ls",
    "weighted_rpcholesky_steps",
    "recombination",
    "simplex_qp",
    "affine_weights",
    "amd_lowrank",
    "lowrank_residual",
    "factor32",
    "lowrank_quad",
    "dksd_pass",
    "median_pairwise_distance",
    "score_field_rows",
    "score_field_figures",
    "stein_moments",
    "omp_max_threads",
    "cancel_scope",
    "cancel_all",
    "set_call_scope",
]

#: ``{name: code}`` of the base kernels the compiled backends know ("IMQ", "Gaussian",
#: "Matern15", "Matern25"), from the one list engine/shared/base_kernels.inc: a compiled kernel
#: class of :mod:`stein_coreset.kernels` takes its ``code`` here.
BASE_KERNEL_CODES: dict[str, int] = dict(_core.BASE_KERNEL_CODES)


def _polled(desc: str, total: int, progress: bool, unit: str = "steps"):
    """A bar over ``total`` units of the C++ loop run inside the block (``_core``'s counter)."""
    return polled(desc, total, _core.progress_units, _core.progress_reset, progress, unit)


def handle(K):
    """A ``_core.Kernel`` over host copies of K's whitened points and their structure-of-arrays
    layout (one transfer, one layout, cached and shared by ``K.with_threads``). A base kernel
    the C++ does not know is a ValueError naming it."""
    if "handle" not in K._cache:
        if not is_compiled_kernel(K.base):
            raise ValueError(
                f"kernel: {type(K.base).__name__} is not a base kernel the compiled "
                f"loops know ({', '.join(c.__name__ for c in COMPILED_KERNELS)}); this "
                "step (KT-SPLIT, KT-Swap, KT-Swap-LS, RPCholesky or the C++ evaluator) "
                "cannot evaluate it. Use a built-in kernel, or a method that needs only "
                "kernel blocks (e.g. 'st')"
            )
        U = aa.to_host(K.U)
        T = None if K.T is None else aa.to_host(K.T)
        mean = None if K.mean is None else aa.to_host(K.mean)
        K._cache["handle"] = _core.Kernel(
            int(K.base.code), float(K.base.sigma), float(K.base.beta), U, T, mean, K.mean_all
        )
    return K._cache["handle"]


def gram(K, rows, cols=None) -> np.ndarray:
    """Host block k_P(x_rows, x_cols) (host int64 sequences; cols None: all n)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    cols = None if cols is None else np.ascontiguousarray(cols, dtype=np.int64)
    return _core.gram(handle(K), rows, cols, K.n_threads)


def matvec(K, w) -> np.ndarray:
    """K w for a host (n,) w, from K's upper triangle (src_cpp/soa_kernel)."""
    return _core.matvec_soa(handle(K), np.ascontiguousarray(w, dtype=np.float64), K.n_threads)


def quad(K, w) -> float:
    """w^T K w for a host (n,) w, from K's upper triangle."""
    w = np.ascontiguousarray(w, dtype=np.float64)
    return float(_core.quad_soa(handle(K), w, K.n_threads))


def column(K, j: int) -> np.ndarray:
    """Host column k_P(x_i, x_j)."""
    return _core.kernel_column(handle(K), int(j), K.n_threads)


def row_means(K, rows) -> np.ndarray:
    """Host (1/n) sum_j k_P(x_r, x_j) for the host int64 ``rows``."""
    return _core.kernel_row_means(handle(K), rows, K.n_threads)


def coreset_sums(K, coresets) -> np.ndarray:
    """Host (L,) sums of K over the rows of the host int64 (L, m) ``coresets``."""
    return _core.coreset_sums(handle(K), coresets, K.n_threads)


def stein_thinning(K, m: int, progress: bool = False) -> np.ndarray:
    """Greedy Stein thinning (Alg. D.1) in C++: (m,) int64 indices in selection order; a bar
    over the steps with ``progress``."""
    with _polled("Stein thinning", m, progress):
        out = _core.stein_thinning(handle(K), int(m), K.n_threads)
    return np.asarray(out, dtype=np.int64)


def kt_split_units(N: int, t: int) -> int:
    """The progress units of a C++ KT-SPLIT of N points in t rounds (src_cpp/progress.hpp: pair k
    of a halving counts k + 1, its walk's length)."""
    units, size = 0, int(N)
    for j in range(int(t)):
        pairs = size // 2
        units += (1 << j) * pairs * (pairs + 1) // 2
        size = pairs
    return units


def kt_split_uniforms(N: int, t: int, seed: int) -> np.ndarray:
    """The uniforms a KT-SPLIT of N points in t rounds draws from ``seed`` (every backend uses
    them, so all split alike up to the rounding of the walk's sums)."""
    return _core.kt_split_uniforms(int(N), int(t), seed)


def kt_halving_uniforms(N: int, seeds: np.ndarray) -> np.ndarray:
    """The uniforms of independent halvings of N points, one seed per halving."""
    return _core.kt_halving_uniforms(int(N), seeds)


def kt_split(K, idx: np.ndarray, t: int, delta: float, seed: int, uniforms=None,
             progress: bool = False) -> np.ndarray:
    """KT-SPLIT (Alg. D.2) in C++: (2^t, size) int64 coresets of the host index sequence idx."""
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    with _polled("KT-SPLIT", kt_split_units(idx.size, t), progress, "entries"):
        return _core.kt_split(handle(K), idx, int(t), float(delta), seed, uniforms, K.n_threads)


def kt_halvings(K, blocks: np.ndarray, delta: float, seeds: np.ndarray,
                progress: bool = False) -> np.ndarray:
    """B independent KT-SPLIT halvings (Alg. D.2, t = 1) of the rows of the (B, N) host index
    array ``blocks``, in C++: (B, 2, N // 2) int64 halves."""
    blocks = np.ascontiguousarray(blocks, dtype=np.int64)
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    with _polled("KT-SPLIT", blocks.shape[0] * kt_split_units(blocks.shape[1], 1), progress,
                 "entries"):
        return _core.kt_halvings(handle(K), blocks, float(delta), seeds, K.n_threads)


def kt_swap_refine(K, I: np.ndarray, passes: int, sorted_sweeps: bool = False,
                   progress: bool = False) -> int:
    """Greedy KT-Swap (Alg. D.3) in C++ on the int64 coreset I, in place; the number of swaps."""
    with _polled("KT-Swap", int(passes) * I.size, progress, "swaps"):
        return _core.kt_swap_refine(handle(K), I, int(passes), K.n_threads, bool(sorted_sweeps))


def kt_swap_ls(K, dense: np.ndarray, order: np.ndarray, fmt: int) -> float:
    """KT-Swap-LS (Alg. G.2) in C++, in place on the dense (n,) host weights; w^T K w."""
    return _core.kt_swap_ls(
        handle(K), dense, np.ascontiguousarray(order, dtype=np.int64), int(fmt), K.n_threads
    )


def weighted_rpcholesky_steps(K, sw, d, Ft, pivots, i0: int, i1: int, u, tol: float) -> int:
    """Steps i0..i1-1 of weighted RPCholesky (Alg. F.1) in C++, in place on host state; the
    step it stopped at."""
    return int(_core.weighted_rpcholesky(handle(K), sw, d, Ft, pivots, int(i0), int(i1), u,
                                         float(tol), K.n_threads))


def recombination(A: np.ndarray, x0: np.ndarray, points_major: bool = False,
                  n_threads: int = 1) -> np.ndarray:
    """Recombination (Alg. G.1): x >= 0 with A x = A x0 and at most rank(A) nonzeros."""
    return _core.recombination(A, np.ascontiguousarray(x0, dtype=np.float64), bool(points_major),
                               int(n_threads))


def simplex_qp(KJ: np.ndarray, w0: np.ndarray, max_iter: int):
    """The active-set QP of ``weights.simplex_weights`` in C++ (serial, updated Cholesky):
    ``(w, steps)``, or ``(None, -1)`` when it needs the eigendecomposition fallback."""
    return _core.simplex_qp(np.ascontiguousarray(KJ, dtype=np.float64),
                            np.ascontiguousarray(w0, dtype=np.float64), int(max_iter))


def affine_weights(KJ: np.ndarray):
    """The Cholesky path of ``weights.affine_weights`` in C++ (serial); None: use the
    eigendecomposition fallback."""
    return _core.affine_weights(np.ascontiguousarray(KJ, dtype=np.float64))


def amd_lowrank(F, res, w, v, t0: int, steps: int, eta: float, n_threads: int) -> None:
    """AMD steps t0+1..t0+steps (Alg. F.2) on F F^T + diag(res) in C++ (src_cpp/amd.cpp), F a
    host float32 factor; (w, v) updated in place."""
    _core.amd_lowrank(F, res, w, v, int(t0), int(steps), float(eta), int(n_threads))


def lowrank_residual(F, diag, n_threads: int):
    """``diag - rowsum(F * F)`` for host arrays, in C++ on the thread team (src_cpp/amd.hpp),
    without an (n, r) temporary."""
    return _core.lowrank_residual(np.asarray(F, dtype=np.float64),
                                  np.ascontiguousarray(diag, dtype=np.float64), int(n_threads))


def factor32(F, n_threads: int):
    """``(G, e)``: ``G = float32(2^-e F)`` for a host F, in C++ on the thread team
    (src_cpp/amd.hpp): the same bits as NumPy's."""
    G, e = _core.factor32(np.asarray(F, dtype=np.float64), int(n_threads))
    return G, int(e)


def lowrank_quad(F, res, c, rows, n_threads: int) -> float:
    """``c^T K'_JJ c`` of K' = F F^T + diag(res) on host arrays (J = rows, or all rows when
    None), summed in C++ in a fixed order (src_cpp/amd.hpp)."""
    return float(_core.lowrank_quad(np.asarray(F, dtype=np.float64),
                                    np.ascontiguousarray(res, dtype=np.float64),
                                    np.ascontiguousarray(c, dtype=np.float64), rows,
                                    int(n_threads)))


def dksd_pass(U, V, F, full, base, sigma, beta, lam, need_grad, n_threads: int):
    """The DKSD U-statistic pass and its adjoints in C++ (src_cpp/dksd.hpp) on host arrays (F
    flattened): ``(total, Gv, Gf)``."""
    return _core.dksd_pass(U, V, np.ascontiguousarray(F).reshape(-1), full, base, sigma,
                           beta, lam, need_grad, int(n_threads))


def median_pairwise_distance(U: np.ndarray, n_threads: int) -> float:
    """``numpy.median`` of the pairwise distances of the rows of the host U, in C++
    (src_cpp/pairwise.hpp)."""
    return float(_core.median_pairwise_distance(U, n_threads))


def score_field_rows(X: np.ndarray, S: np.ndarray, no_prev: int):
    """Of the first half of the C-contiguous float64 host rows X, S (the second half: the row
    before each), the rows that differ from the one before them and the counts of repeats and of
    repeats with another score, in C++ (src_cpp/score_field.hpp): ``(keep, repeats,
    conflicts)``."""
    return _core.score_field_rows(X, S, int(no_prev))


def score_field_figures(X: np.ndarray, S: np.ndarray, keep: np.ndarray, q: np.ndarray,
                        part: np.ndarray, whiten: bool):
    """The nearest-neighbour score-field figures of the rows ``keep`` of the C-contiguous
    float64 host X, S in C++ (src_cpp/score_field.hpp): ``(nn, closer, pairs, sign)``."""
    return _core.score_field_figures(X, S, keep, q, part, bool(whiten))


def stein_moments(X: np.ndarray, S: np.ndarray, w):
    """The per-coordinate moments of Stein's identity of the host rows X, S (weights w or None)
    in C++ (src_cpp/stein_moments.hpp): ``(moments (5, d), spread, n_eff)``."""
    return _core.stein_moments(np.ascontiguousarray(X, dtype=np.float64),
                               np.ascontiguousarray(S, dtype=np.float64),
                               None if w is None else np.ascontiguousarray(w, dtype=np.float64))


def omp_max_threads() -> int:
    """The OpenMP team-size limit in force (OMP_NUM_THREADS, a threadpoolctl limit); 0 for a
    build without OpenMP."""
    return int(_core.omp_max_threads())


def cancel_scope(scope: int) -> int:
    """Stop the C++ calls in flight begun under ``scope`` (any thread), and refuse later ones;
    returns how many were in flight (src_cpp/cancel.hpp)."""
    return _core.cancel_scope(scope)


def cancel_all() -> int:
    """Stop every C++ call in flight in this process, on any thread; returns how many."""
    return _core.cancel_all()


def set_call_scope(scope: int) -> int:
    """Make ``scope`` the cancellation scope of this thread's next calls; returns the previous."""
    return _core.set_call_scope(scope)

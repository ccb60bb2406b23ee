"""``compress``: the single entry point, and the only place that maps method names to pipelines.

A pipeline is a function ``run(job) -> (indices, weights, info)`` over a :class:`Job`, which holds
the validated input and the target kernel matrix k_P: the Stein kernel at (X, S) for the debiased
methods, or the base kernel centred at the input for the unbiased baselines (paper footnote 2) —
one code path for both.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _array_api as aa
from ._threads import effective_n_threads
from .kernels import (
    IMQ,
    KernelMatrix,
    SteinKernel,
    _RadialKernel,
    centred_kernel_matrix,
    median_bandwidth,
)

__all__ = ["compress", "Coreset", "METHODS", "available_methods"]


@dataclass
class Coreset:
    """Result of :func:`compress`: a weighted subset of the input points.

    Attributes
    ----------
    indices : (k,) int array of distinct indices into X (k <= size), in X's namespace.
    weights : (k,) float array summing to 1 (equal, simplex or constant-preserving).
    points : (k, d) array, ``X[indices]``.
    kind : "equal" | "simplex" | "constant".
    method : the method name.
    ksd : MMD_{k_p} of the weighted coreset to P when scores were given, else None.
    info : dict of run details (sizes, rounds, timings, dropped rows, ...).
    """

    indices: Any
    weights: Any
    points: Any
    kind: str
    method: str
    ksd: float | None
    info: dict = field(default_factory=dict)

    def dense(self, n: int):
        """The (n,) weight vector over all input points (zero off the coreset)."""
        xp = aa.namespace(w=self.weights)[0]
        dev = aa.device_of(self.weights)
        n = int(n)
        idx_max = int(xp.max(self.indices)) if self.indices.shape[0] else -1
        if idx_max >= n:
            raise ValueError(f"n = {n} is smaller than the largest index {idx_max}")
        host = np.zeros(n)
        host[aa.to_host(self.indices, np.int64)] = aa.to_host(self.weights)
        return aa.from_host(host, xp=xp, device=dev)

    def __len__(self):
        return int(self.indices.shape[0])

    def __repr__(self):
        k = "None" if self.ksd is None else f"{self.ksd:.4g}"
        return f"Coreset(method={self.method!r}, kind={self.kind!r}, size={len(self)}, ksd={k})"


@dataclass
class Job:
    """What a pipeline gets: validated inputs and the target kernel matrix K (k_P on X)."""

    X: Any
    S: Any
    make_kernel: Callable[[], tuple]
    size: int
    rank: int | None
    rng: np.random.Generator
    progress: bool
    options: dict
    weights: Any = None
    xp: Any = None
    device: Any = None
    n_threads: int = 1

    _kernel: tuple | None = None
    kernel: Any = None  # the ``kernel`` argument of compress, as given

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def K(self) -> KernelMatrix:
        """The target kernel matrix k_P on X, built on first use (O(n^2) for the baselines)."""
        return self._kernels()[1]

    @property
    def stein(self) -> SteinKernel | None:
        """The Stein kernel of a debiased run (None for the unbiased baselines)."""
        return self._kernels()[0]

    def _kernels(self):
        if self._kernel is None:
            self._kernel = self.make_kernel()
        return self._kernel

    def option(self, name, default):
        return self.options.pop(name, default)


@dataclass(frozen=True)
class Method:
    kind: str
    debiased: bool
    run: Callable[[Job], tuple]
    summary: str
    takes_weights: bool = False  # whether ``compress(weights=...)`` means something to it


def _standard(job: Job):
    """Standard thinning: keep every (n/size)-th point of the sequence (the chain order)."""
    idx = _standard_indices(job.n, job.size)
    return idx, np.full(idx.shape[0], 1.0 / idx.shape[0]), {}


def _iid(job: Job):
    """i.i.d. uniform subsample of ``size`` distinct points."""
    idx = np.sort(job.rng.choice(job.n, size=job.size, replace=False)).astype(np.int64)
    return idx, np.full(job.size, 1.0 / job.size), {}


def _as_equal_weights(idx, m: int):
    """A multiset of m indices as distinct indices with weights (count / m)."""
    uniq, counts = np.unique(np.asarray(idx, dtype=np.int64), return_counts=True)
    return uniq, counts / float(m)


def _standard_indices(n: int, m: int) -> np.ndarray:
    """The m indices standard thinning keeps: the last of each of m equal blocks of [0, n)."""
    idx = np.floor(np.arange(m) * (n / m)).astype(np.int64) + (n // m) - 1
    return np.clip(idx, 0, n - 1)


def _st(job: Job):
    """Stein thinning (Alg. D.1) to ``size`` greedy steps."""
    from .algorithms import stein_thinning

    idx = stein_thinning(job.K, job.size, progress=job.progress)
    uniq, w = _as_equal_weights(idx, job.size)
    return uniq, w, {"steps": job.size}


def _skt(job: Job):
    """Stein Kernel Thinning (Alg. 1): ST for n' = m 2^ceil(log2(n/m)) steps, then KT targeting
    P from n' (with multiplicity) to m, with the first m ST picks as KT-Swap's baseline.

    Options: ``delta`` (KT failure probability, default 1/2), ``standard_thin`` (Rem. 2: when
    m^2 < n, standard-thin the input to m^2 points first; default True), ``swap_passes`` (1).
    """
    from .algorithms import kernel_thinning, stein_thinning

    n, m = job.n, job.size
    delta = job.option("delta", 0.5)
    thin = bool(job.option("standard_thin", True))
    passes = job.option("swap_passes", 1)
    K = job.K
    sub = None
    if thin and m * m < n:
        sub = _standard_indices(n, m * m)
        K = K.take(sub)
    t = max(0, math.ceil(math.log2(K.n / m) - 1e-12))
    n_prime = m << t
    st = stein_thinning(K, n_prime, progress=job.progress)
    idx = kernel_thinning(
        K,
        m,
        indices=np.sort(st),
        delta=delta,
        rng=job.rng,
        baseline=st[:m],
        passes=passes,
    )
    if sub is not None:
        idx = sub[idx]
    uniq, w = _as_equal_weights(idx, m)
    info = {
        "standard_thin": sub is not None,
        "n_thinned": int(K.n),
        "n_prime": int(n_prime),
        "kt_rounds": int(t),
    }
    return uniq, w, info


def _kt(job: Job):
    """Kernel thinning of the input's own empirical distribution (unbiased baseline): the KT
    code of SKT with the base kernel centred at the input (paper footnote 2). The input is
    standard-thinned to m 2^floor(log2(n/m)) points for KT-SPLIT; KT-Swap then swaps over all n
    points, with the standard-thinning coreset as baseline (as goodpoints does).

    Options: ``delta`` (default 1/2), ``swap_passes`` (1).
    """
    from .algorithms import kernel_thinning

    n, m = job.n, job.size
    delta = job.option("delta", 0.5)
    passes = job.option("swap_passes", 1)
    t = max(0, int(math.floor(math.log2(n / m) + 1e-12)))
    n_split = m << t
    seq = np.arange(n, dtype=np.int64) if n_split == n else _standard_indices(n, n_split)
    idx = kernel_thinning(
        job.K,
        m,
        indices=seq,
        delta=delta,
        rng=job.rng,
        baseline=_standard_indices(n, m),
        passes=passes,
    )
    uniq, w = _as_equal_weights(idx, m)
    return uniq, w, {"n_split": int(n_split), "kt_rounds": int(t)}


def _compresspp_plan(job: Job):
    """Sizes shared by LSKT and the Compress++ baseline.

    The output size is m = the largest power of two <= ``size`` (KT halves, so m must be
    sqrt(n') / 2^j); when m^2 < n the input is standard-thinned to m^2 points first (Rem. 2,
    option ``standard_thin``, default True), else KT-Compress++ runs on
    n' = 4^ceil(log4 n) resampled points.
    """
    n, size = job.n, job.size
    g = job.option("g", 4)
    if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 0:
        raise ValueError(f"g must be a non-negative integer, got {g!r}")
    delta = job.option("delta", 0.5)
    thin = bool(job.option("standard_thin", True))
    m = 1 << (int(size).bit_length() - 1)
    sub = _standard_indices(n, m * m) if thin and m * m < n else None
    n_used = n if sub is None else m * m
    j = 0
    while 4**j < n_used:
        j += 1
    n_prime = 4**j
    # the COMPRESS output (2^g sqrt(n') points) must hold at least m points
    g_used = max(int(g), int(math.log2(m)) - j)
    info = {
        "size_used": m,
        "standard_thin": sub is not None,
        "n_thinned": int(n_used),
        "n_prime": int(n_prime),
        "g": int(g_used),
    }
    return m, sub, n_prime, g_used, delta, info


def _lskt(job: Job):
    """Low-rank SKT (Alg. 3): Low-rank Debiasing (Alg. 2) of the input, Resample (Alg. E.3) to
    n' = 4^ceil(log4 n) points, then KT-Compress++ (Alg. F.3) targeting P to m points.

    ``size`` is rounded down to a power of two m (reported as ``res.info["size_used"]``); when
    m^2 < n the input is standard-thinned to m^2 points first (Rem. 2). ``rank`` defaults to
    ceil(sqrt(n)) of the (thinned) input. Options: ``rounds`` (Q = 3), ``steps`` (AMD steps,
    7 sqrt(n)), ``g`` (4), ``delta`` (1/2), ``standard_thin`` (True).
    """
    from .algorithms import kt_compresspp, low_rank_debias, resample

    m, sub, n_prime, g, delta, info = _compresspp_plan(job)
    rounds = job.option("rounds", 3)
    steps = job.option("steps", None)
    K = job.K if sub is None else job.K.take(sub)
    rank = job.rank if job.rank is not None else math.ceil(math.sqrt(K.n))
    rank = min(int(rank), K.n)
    t0 = time.perf_counter()
    w = low_rank_debias(
        K, rank, rounds=rounds, steps=steps, rng=job.rng, progress=job.progress
    )
    t1 = time.perf_counter()
    seq = resample(w, n_prime, job.rng)
    idx, cinfo = kt_compresspp(
        K, indices=seq, g=g, delta=delta, rng=job.rng, m=m, progress=job.progress,
        return_info=True,
    )
    t2 = time.perf_counter()
    if sub is not None:
        idx = sub[idx]
    uniq, wts = _as_equal_weights(idx, m)
    info.update(
        rank=rank,
        rounds=int(rounds),
        steps=int(steps) if steps is not None else math.ceil(7.0 * math.sqrt(K.n)),
        compress_levels=cinfo["compress_levels"],
        thin_rounds=cinfo["thin_rounds"],
        time_ld_s=t1 - t0,
        time_compresspp_s=t2 - t1,
    )
    return uniq, wts, info


def _baseline_base_kernel(job: Job) -> _RadialKernel:
    kernel = job.kernel
    base = kernel.base if isinstance(kernel, SteinKernel) else kernel
    if base is None:
        base = IMQ(sigma=median_bandwidth(job.X))
    if not isinstance(base, _RadialKernel):
        raise TypeError(f"kernel must be a base kernel or SteinKernel, got {type(kernel).__name__}")
    return base


def _compresspp(job: Job):
    """KT-Compress++ of the input's own empirical distribution (unbiased baseline; Shetty et al.,
    2022, with the KT-SPLIT halving of Alg. F.3).

    COMPRESS splits with the base kernel (KT-SPLIT's choices do not depend on the centring).
    THIN and KT-Swap then run on the 2^g sqrt(n') COMPRESS output points C, with the base kernel
    centred according to the option ``swap_target``:

    - ``"input"`` (default): centred at the whole input, ``k(x, y) - m(x) - m(y)`` with the
      input's mean embedding m evaluated at C only, O(n 2^g sqrt(n')) evaluations. (The constant
      ``E k(Z, Z')`` is estimated by the mean of m over C; it moves no decision.) Centring at the
      whole input for all n points would cost O(n^2) and dominate the run at n = 2^16; a
      standard-thinned reference of s points would put the target O(s^-1/2) away from the input.
    - ``"compress"``: centred at C's own empirical distribution, as goodpoints'
      ``compresspp_kt`` does (O(|C|^2); measurably worse MMD to the input).
    - ``"input_all"``: the exact centred kernel of the ``"kt"`` baseline (O(n^2)) and KT-Swap
      over all n points.

    Sizes as for ``"lskt"``; options ``g``, ``delta``, ``standard_thin``, ``swap_target``.
    """
    from .algorithms import kt_compresspp, resample

    m, sub, n_prime, g, delta, info = _compresspp_plan(job)
    target = job.option("swap_target", "input")
    if target not in ("input", "compress", "input_all"):
        raise ValueError(
            f"swap_target must be 'input', 'compress' or 'input_all', got {target!r}"
        )
    xp, dev = job.xp, job.device
    if target == "input_all":
        K = job.K if sub is None else job.K.take(sub)
        thin_kernel = None
    else:
        base = _baseline_base_kernel(job)
        Xs = job.X if sub is None else xp.take(job.X, aa.as_index_array(xp, sub, dev), axis=0)
        K = KernelMatrix(base, Xs, n_threads=job.n_threads)

        def thin_kernel(C):
            XC = xp.take(Xs, aa.as_index_array(xp, C, dev), axis=0)
            if target == "compress":
                return centred_kernel_matrix(base, XC)
            mC = K.row_means(C)
            return KernelMatrix(base, XC, None, mC, float(xp.mean(mC)), n_threads=job.n_threads)

    nk = K.n
    seq = (
        np.arange(nk, dtype=np.int64)
        if n_prime == nk
        else resample(aa.from_host(np.full(nk, 1.0 / nk), xp=xp, device=dev), n_prime, job.rng)
    )
    idx, cinfo = kt_compresspp(
        K, indices=seq, g=g, delta=delta, rng=job.rng, m=m, thin_kernel=thin_kernel,
        progress=job.progress, return_info=True,
    )
    if sub is not None:
        idx = sub[idx]
    uniq, wts = _as_equal_weights(idx, m)
    info.update(
        swap_target=target,
        compress_levels=cinfo["compress_levels"],
        compress_size=cinfo["compress_size"],
        thin_rounds=cinfo["thin_rounds"],
    )
    return uniq, wts, info

#: Method name -> pipeline. Filled here as the algorithms land; see SPEC.md "Methods".
METHODS: dict[str, Method] = {
    "standard": Method("equal", False, _standard, "keep every n/size-th point"),
    "iid": Method("equal", False, _iid, "uniform subsample without replacement"),
    "st": Method("equal", True, _st, "Stein thinning, greedy (Alg. D.1)"),
    "skt": Method("equal", True, _skt, "Stein kernel thinning: ST then KT targeting P (Alg. 1)"),
    "kt": Method("equal", False, _kt, "kernel thinning of the input (Alg. D.2, centred kernel)"),
    "lskt": Method(
        "equal", True, _lskt, "low-rank SKT: LD, Resample, KT-Compress++ targeting P (Alg. 3)"
    ),
    "compresspp": Method(
        "equal", False, _compresspp, "KT-Compress++ of the input (Shetty et al.; Alg. F.3)"
    ),
}

# ---- weighted compression (Alg. 4-7): RT / CT after a debiasing step ---------------------------


def _thin_weighted(job: Job, w, label: str, rank, K=None):
    """RT (label "rt") or CT ("ct") of the simplex weights w to at most m = job.size points,
    targeting K (default job.K).

    ``rank`` is the RT/CT test-vector count (None: m - 1 for RT, m for CT); the non-low-rank
    weighted methods take it from ``compress(rank=...)``."""
    from .algorithms.cholesky_thinning import cholesky_thinning
    from .algorithms.recombination import recombination_thinning

    thin = recombination_thinning if label == "rt" else cholesky_thinning
    idx, wts = thin(job.K if K is None else K, w, job.size, rank=rank, rng=job.rng)
    return idx, aa.to_host(wts), {"support": int(idx.shape[0])}


def _centred_at_weights(job: Job):
    """The base kernel centred at the weighted input sum_j w_j delta_{x_j} (job.weights), so that
    MMD_{k_P}(Q, P) is the MMD of Q to the weighted input. O(n^2) for the centring vector."""
    K = job.K
    if job.weights is None:
        return K
    plain = KernelMatrix(K.base, K.U, backend=K.backend, n_threads=K.n_threads)
    mean = plain.matvec(job.weights)
    return KernelMatrix(
        K.base,
        K.U,
        None,
        mean,
        float(K.xp.sum(job.weights * mean)),
        backend=K.backend,
        n_threads=K.n_threads,
    )


def _baseline_weighted(job: Job, label: str):
    return _thin_weighted(job, job.weights, label, job.rank, _centred_at_weights(job))


def _rt(job: Job):
    """Recombination Thinning (Alg. 4) of the input's own (weighted) empirical distribution."""
    return _baseline_weighted(job, "rt")


def _ct(job: Job):
    """Cholesky Thinning (Alg. 6) of the input's own (weighted) empirical distribution."""
    return _baseline_weighted(job, "ct")


def _stein_thinning_weights(job: Job):
    """Stein Thinning (Alg. D.1) run for n steps, as simplex weights (counts / n). O(n^2)."""
    from .algorithms import stein_thinning

    idx = stein_thinning(job.K, job.n, progress=job.progress)
    w = np.bincount(idx, minlength=job.n) / float(job.n)
    return aa.from_host(w, xp=job.K.xp, device=job.K.device)


def _low_rank_weights(job: Job):
    """Low-rank Debiasing (Alg. 2) weights and the rank used (default n^0.5, SPEC)."""
    from .algorithms import low_rank_debias

    rank = job.rank if job.rank is not None else max(1, round(math.sqrt(job.n)))
    w = low_rank_debias(
        job.K,
        rank,
        rounds=job.option("rounds", 3),
        steps=job.option("steps", None),
        rng=job.rng,
        progress=job.progress,
    )
    return w, rank


def _sr(job: Job):
    """Stein Recombination (Alg. 5): Stein Thinning weights, then RT."""
    return _thin_weighted(job, _stein_thinning_weights(job), "rt", job.rank)


def _sc(job: Job):
    """Stein Cholesky (Alg. 7): Stein Thinning weights, then CT."""
    return _thin_weighted(job, _stein_thinning_weights(job), "ct", job.rank)


def _lsr(job: Job):
    """Low-rank Stein Recombination (Alg. 5): Low-rank Debiasing, then RT."""
    w, rank = _low_rank_weights(job)
    idx, wts, info = _thin_weighted(job, w, "rt", None)
    return idx, wts, {**info, "rank": rank}


def _lsc(job: Job):
    """Low-rank Stein Cholesky (Alg. 7): Low-rank Debiasing, then CT."""
    w, rank = _low_rank_weights(job)
    idx, wts, info = _thin_weighted(job, w, "ct", None)
    return idx, wts, {**info, "rank": rank}


METHODS.update(
    {
        "rt": Method("simplex", False, _rt, "Recombination Thinning of the input (Alg. 4)", True),
        "ct": Method("constant", False, _ct, "Cholesky Thinning of the input (Alg. 6)", True),
        "sr": Method("simplex", True, _sr, "Stein Thinning, then Recombination Thinning (Alg. 5)"),
        "sc": Method("constant", True, _sc, "Stein Thinning, then Cholesky Thinning (Alg. 7)"),
        "lsr": Method(
            "simplex", True, _lsr, "Low-rank Debiasing, then Recombination Thinning (Alg. 5)"
        ),
        "lsc": Method(
            "constant", True, _lsc, "Low-rank Debiasing, then Cholesky Thinning (Alg. 7)"
        ),
    }
)

#: Every name of SPEC.md; those not in METHODS yet are reported as not implemented.
ALL_METHOD_NAMES = (
    "st",
    "skt",
    "lskt",
    "sr",
    "lsr",
    "sc",
    "lsc",
    "standard",
    "iid",
    "kt",
    "compresspp",
    "rt",
    "ct",
)


def available_methods() -> list[str]:
    return [m for m in ALL_METHOD_NAMES if m in METHODS]


def _target_kernel(X, S, kernel, debiased: bool, n_threads: int):
    if debiased:
        if isinstance(kernel, SteinKernel) or kernel is None:
            sk = kernel or SteinKernel()
        elif isinstance(kernel, _RadialKernel):
            sk = SteinKernel(kernel)
        else:
            raise TypeError(
                f"kernel must be a SteinKernel or base kernel, got {type(kernel).__name__}"
            )
        return sk, sk.bind(X, S, n_threads=n_threads)
    base = kernel.base if isinstance(kernel, SteinKernel) else kernel
    if base is None:
        base = IMQ(sigma=median_bandwidth(X))
    if not isinstance(base, _RadialKernel):
        raise TypeError(f"kernel must be a base kernel or SteinKernel, got {type(kernel).__name__}")
    return None, centred_kernel_matrix(base, X, n_threads=n_threads)


#: Methods whose ``rank`` (LD rank, or RT/CT test-vector count) ``tau`` sets.
RANKED_METHODS = ("lskt", "lsr", "lsc", "sr", "sc", "rt", "ct")


def _stein_for_baseline(kernel, X) -> SteinKernel:
    """The Stein kernel that scores an unbiased baseline's coreset: the same kernel as the
    debiased methods get (the median bandwidth is that of the whole input)."""
    if isinstance(kernel, SteinKernel):
        return kernel
    if isinstance(kernel, _RadialKernel):
        return SteinKernel(kernel)
    return SteinKernel(IMQ(sigma=median_bandwidth(X)))


def compress(
    X,
    S=None,
    *,
    size: int,
    method: str,
    kernel=None,
    weights=None,
    rank: int | None = None,
    seed=None,
    progress: bool = False,
    nan_policy: str = "raise",
    n_threads: int | None = None,
    tau: float | None = None,
    **options,
) -> Coreset:
    """Compress the sample X (with scores S = grad log p(X)) to at most ``size`` weighted points.

    Parameters
    ----------
    X : (n, d) array
        Input points, in sequence order (MCMC output).
    S : (n, d) array, optional
        Scores at X; required by the debiased methods, and used for ``res.ksd`` when given.
    size : int
        Coreset size m, 1 <= m <= n.
    method : str
        One of :func:`available_methods` (SPEC.md "Methods").
    kernel : SteinKernel or base kernel, optional
        Default: Stein kernel of IMQ(beta=-1/2) with median bandwidth (debiased methods), or that
        IMQ base centred at the input (unbiased baselines).
    weights : (n,) array, optional
        Weights of the input sample, for the methods that accept them.
    rank : int, optional
        Rank of the low-rank methods (default n^0.5).
    tau : float in (0, 1], optional
        For the low-rank and weighted methods: ``rank = ceil(n^tau)`` (App. I.2 uses 0.5; 0.4
        makes Low-rank Debiasing sub-quadratic). An explicit ``rank`` wins.
    seed : int or numpy.random.Generator, optional
    progress : bool
        Show progress on long runs.
    nan_policy : {"raise", "omit"}
        "omit" drops rows with NaN/inf in X or S and reports the count in ``res.info``.
    n_threads : int, optional
        Threads of the C++ loops (default, or -1: the cores this process may use). Results do
        not depend on it.
    **options
        Method-specific options (see the method's building block); unknown ones raise.
    """
    if not isinstance(method, str) or method not in ALL_METHOD_NAMES:
        raise ValueError(f"unknown method {method!r}; valid methods: {', '.join(ALL_METHOD_NAMES)}")
    if method not in METHODS:
        raise NotImplementedError(
            f"method {method!r} is not implemented yet; available: {', '.join(available_methods())}"
        )
    n_threads = effective_n_threads(n_threads)
    if tau is not None:
        if method not in RANKED_METHODS:
            raise ValueError(
                f"tau: method {method!r} has no rank; tau applies to {', '.join(RANKED_METHODS)}"
            )
        if isinstance(tau, bool) or not isinstance(tau, (int, float, np.floating, np.integer)):
            raise TypeError(f"tau must be a real number, got {type(tau).__name__}")
        tau = float(tau)
        if not 0.0 < tau <= 1.0:
            raise ValueError(f"tau must lie in (0, 1], got {tau}")
    if nan_policy not in ("raise", "omit"):
        raise ValueError(f"nan_policy must be 'raise' or 'omit', got {nan_policy!r}")
    spec = METHODS[method]
    if weights is not None and not spec.takes_weights:
        takers = ", ".join(repr(k) for k, v in METHODS.items() if v.takes_weights)
        raise ValueError(
            f"weights: method {method!r} does not take input weights (the debiased methods "
            f"compute their own from the scores); methods that do: {takers}"
        )
    xp, dev = aa.namespace(X=X, S=S, weights=weights)
    X = aa.check_points(X, xp, "X", allow_nonfinite=True)
    if S is not None:
        S = aa.check_scores(S, X, xp, "S", allow_nonfinite=True)
    elif spec.debiased:
        raise ValueError(f"method {method!r} is debiased and needs the scores S = grad log p(X)")
    info: dict = {}
    keep = None
    bad = aa.nonfinite_rows(xp, X)
    if S is not None:
        bad = bad | aa.nonfinite_rows(xp, S)
    n_bad = int(xp.sum(xp.astype(bad, xp.int64)))
    if n_bad:
        if nan_policy == "raise":
            raise ValueError(
                f"X or S has NaN or inf in {n_bad} of its {X.shape[0]} rows; "
                "pass nan_policy='omit' to drop them"
            )
        keep_host = np.flatnonzero(~aa.to_host(bad, np.bool_))
        if keep_host.size == 0:
            raise ValueError("every row of X or S has NaN or inf")
        keep = aa.as_index_array(xp, keep_host, dev)
        X = xp.take(X, keep, axis=0)
        S = None if S is None else xp.take(S, keep, axis=0)
        weights = None if weights is None else xp.take(weights, keep, axis=0)
        info["n_dropped"] = n_bad
    n = int(X.shape[0])
    size = aa.check_size(size, n)
    if rank is not None:
        rank = aa.check_size(rank, n, "rank")
    elif tau is not None:
        rank = min(n, max(1, math.ceil(n**tau - 1e-9)))
        info["rank_from_tau"] = rank
    if weights is not None:
        weights = aa.check_weights(weights, n, xp, simplex=True, device=dev)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    t0 = time.perf_counter()
    job = Job(
        X,
        S,
        lambda: _target_kernel(X, S, kernel, spec.debiased, n_threads),
        size,
        rank,
        rng,
        bool(progress),
        dict(options),
        weights,
        xp,
        dev,
        n_threads,
        kernel=kernel,
    )
    idx, w, extra = spec.run(job)
    if job.options:
        raise TypeError(
            f"unknown option(s) for method {method!r}: {', '.join(sorted(job.options))}"
        )
    info.update(extra)
    info["n_threads"] = n_threads
    info["time_s"] = time.perf_counter() - t0

    local = np.asarray(idx, dtype=np.int64)
    w = np.asarray(w, dtype=np.float64)
    if local.shape != w.shape or np.unique(local).size != local.size:
        raise RuntimeError(
            f"internal error: method {method!r} returned repeated or misshapen indices"
        )
    if not math.isclose(float(w.sum()), 1.0, rel_tol=1e-8, abs_tol=1e-10):
        raise RuntimeError(
            f"internal error: method {method!r} returned weights summing to {w.sum()}"
        )
    original = local if keep is None else aa.to_host(keep, np.int64)[local]
    local_dev = aa.from_host(local, xp=xp, device=dev)
    weights_out = aa.from_host(w, xp=xp, device=dev)
    points = xp.take(X, local_dev, axis=0)
    res_ksd = None
    if S is not None:
        sk = job.stein if spec.debiased else _stein_for_baseline(kernel, X)
        sub = sk.bind(points, xp.take(S, local_dev, axis=0), n_threads=n_threads)
        res_ksd = math.sqrt(max(sub.quad(weights_out), 0.0))
    indices = aa.from_host(original, xp=xp, device=dev)
    return Coreset(indices, weights_out, points, spec.kind, method, res_ksd, info)

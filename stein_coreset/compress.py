"""``compress``: the single entry point, and the :class:`Coreset` it returns.

The method table (:data:`METHODS`, from :mod:`stein_coreset.methods`) maps each method name to its
pipeline in :mod:`stein_coreset.algorithms`; :func:`compress` validates everything once,
resolves the kernel once, builds the target kernel matrix k_P (the Stein kernel at (X, S) for the
debiased methods, or the base kernel centred at the input for the unbiased baselines, paper
footnote 2) and calls the pipeline with ``check_input=False`` building blocks underneath.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _array_api as aa
from . import _validation as val
from ._progress import resolve as resolve_progress
from ._progress import stage
from ._threads import effective_n_threads
from .algorithms.amd import factor_bytes
from .algorithms.resample import resample
from .diagnostics import check_orientation, check_scores
from .discrepancy import finite_discrepancy
from .engine import Whitening
from .kernels import DEFAULT_KERNEL, RadialKernel, SteinKernel, centred_kernel_matrix
from .methods import (
    LD_DEFAULT_TAU,
    METHODS,
    RANKED_METHODS,
    STOP_AUTO_FIXED_MAX_N,
    Method,
    Option,
    Problem,
)

__all__ = [
    "compress",
    "Coreset",
    "Method",
    "Option",
    "METHODS",
    "RANKED_METHODS",
    "available_methods",
]


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
    info : dict of run details (sizes, rounds, timings, dropped rows, the kernel, ...).
    draw_indices : (size,) int array or None
        Equal-weighted results (``kind == "equal"``): the ``size`` picks with repeats kept, in
        increasing index order (chain order), so ``X[draw_indices]`` is the equal-weight sample.
        ``None`` for simplex and constant weights (see :meth:`resample_equal`).
    draws : (size, d) array or None
        ``X[draw_indices]``: the equal-weight sample, usable anywhere a sample is (its plain mean
        is the coreset's weighted mean). ``None`` unless ``kind == "equal"``.

    Notes
    -----
    ``indices`` / ``weights`` / ``points`` are the support view (each distinct point once, a
    point picked k times out of m has weight k/m); ``draws`` is the sample view. Any recipe that
    ignores weights must use ``draws`` (or ``resample_equal()`` for simplex weights).

    See Also
    --------
    compress : the function that returns it.
    stein_coreset.integrations.arviz.weighted_mean : weighted posterior summaries.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = 0.7 + 1.5 * np.random.default_rng(0).standard_normal((256, 2))
    >>> res = sc.compress(X, -X, 16, "sr", seed=0)       # simplex weights (Alg. 5)
    >>> res
    Coreset(method='sr', kind='simplex', size=16, winner='recombination', ksd=0.06032)
    >>> res.points.shape, round(float(res.weights.sum()), 4), res.draws is None
    ((16, 2), 1.0, True)
    >>> res.resample_equal(16, seed=0).draws.shape       # an equal-weight sample of 16
    (16, 2)
    >>> res.dense(256).shape                             # weights over all input points
    (256,)
    """

    indices: Any
    weights: Any
    points: Any
    kind: str
    method: str
    ksd: float | None
    info: dict = field(default_factory=dict)
    draw_indices: Any = None
    draws: Any = None

    def dense(self, n: int):
        """The (n,) weight vector over all input points (zero off the coreset).

        ``n`` is an integer at least the largest index + 1; a vector larger than memory is a
        ValueError naming n, before it is allocated."""
        xp = aa.namespace(w=self.weights)[0]
        dev = aa.device_of(self.weights)
        n = val.check_int(n, "n", lo=1)  # not 64.9, "64" or True
        idx_max = int(xp.max(self.indices)) if self.indices.shape[0] else -1
        if idx_max >= n:
            raise ValueError(f"n = {n} is smaller than the largest index {idx_max}")
        val.check_buffer(8.0 * n * (1 if isinstance(self.weights, np.ndarray) else 2), "n",
                         f"the dense weight vector over n = {n} points", like=self.weights)
        host = np.zeros(n)
        host[aa.to_host(self.indices, np.int64)] = aa.to_host(self.weights)
        return aa.from_host(host, xp=xp, device=dev)

    def resample_equal(self, size: int | None = None, seed=None) -> Coreset:
        """An equal-weighted version of this coreset: ``size`` draws (default: the number of
        distinct points for simplex weights; this coreset's own draws when it is already equal)
        by stratified residual resampling of the weights (App. E.3, deterministic for a seed).

        Returns a ``Coreset`` of kind "equal" whose ``draws`` are the sample (``ksd`` None: it
        needs the scores; ``info["resampled_from"]`` names the source kind). Constant-preserving
        (signed) weights cannot be resampled and raise ``ValueError``.
        """

        rng = val.check_random_state(seed, "seed")  # checked even when nothing is drawn
        if self.kind == "equal" and size is None:
            return self
        w = aa.to_host(self.weights)
        if (w < 0).any():
            raise ValueError(
                f"resample_equal: this {self.kind!r} coreset has negative weights, which cannot "
                "be resampled; use its weights (res.weights) or a simplex method (sr, lsr)"
            )
        m = len(self) if size is None else val.check_int(size, "size", lo=1)
        pick = resample(w, m, rng)
        xp, dev = aa.namespace(idx=self.indices)
        idx_host = aa.to_host(self.indices, np.int64)
        draw_idx = idx_host[pick]
        uniq, first, counts = np.unique(pick, return_index=True, return_counts=True)
        take = aa.from_host(uniq.astype(np.int64), xp=xp, device=dev)
        draw_pos = aa.from_host(pick.astype(np.int64), xp=xp, device=dev)
        info = dict(self.info, resampled_from=self.kind)
        return Coreset(
            indices=aa.from_host(idx_host[uniq], xp=xp, device=dev),
            weights=aa.from_host(counts / float(m), xp=xp, device=dev),
            points=xp.take(self.points, take, axis=0),
            kind="equal",
            method=self.method,
            ksd=None,
            info=info,
            draw_indices=aa.from_host(draw_idx, xp=xp, device=dev),
            draws=xp.take(self.points, draw_pos, axis=0),
        )

    def __len__(self):
        return int(self.indices.shape[0])

    def summary(self) -> str:
        """One line on what the run did: the result, then each stage's KSD in order and which
        candidate won (``info["stages"]``), and the input diagnostics' suspect if any."""
        k = "n/a (no scores)" if self.ksd is None else f"{self.ksd:.4g}"
        line = f"{self.method}: {len(self)} points ({self.kind} weights), KSD {k}"
        stages = self.info.get("stages")
        if stages:
            parts = []
            for name, st in stages.items():
                if name == "winner":
                    continue
                v = st.get("ksd")
                parts.append(f"{name} {'n/a' if v is None else f'{v:.3g}'}")
            line += f"; stages: {', '.join(parts)}; {stages['winner']} won"
        suspect = (self.info.get("diagnostics") or {}).get("suspect")
        if suspect:
            line += f"; WARNING: the scores look {suspect} (info['diagnostics'])"
        return line

    def __repr__(self):
        k = "None" if self.ksd is None else f"{self.ksd:.4g}"
        extra = "" if self.draws is None else f", draws={int(self.draws.shape[0])}"
        stages = self.info.get("stages")
        if stages:
            extra += f", winner={stages['winner']!r}"
        suspect = (self.info.get("diagnostics") or {}).get("suspect")
        if suspect:
            extra += f", suspect={suspect!r}"
        return (
            f"Coreset(method={self.method!r}, kind={self.kind!r}, size={len(self)}{extra}, "
            f"ksd={k})"
        )


def equal_draw_counts(weights, size: int, method: str, *, search: bool = False) -> np.ndarray:
    """The pick counts ``m * weights`` of an equal-weighted result of m picks, as integers.

    ``m`` is ``size``; with ``search=True`` (a caller that does not know m, e.g. a method that
    rounded its size down) the largest m <= size whose counts are whole numbers summing to m.
    """
    w = np.asarray(weights, dtype=np.float64)
    for m in range(int(size), max(w.size, 1) - 1 if search else int(size) - 1, -1):
        counts = np.rint(w * m).astype(np.int64)
        if counts.sum() == m and (counts >= 1).all() and np.allclose(counts, w * m, atol=1e-6):
            return counts
    raise RuntimeError(
        f"internal error: method {method!r} returned weights that are not counts / {size}"
    )


def available_methods() -> list[str]:
    """The method names :func:`compress` accepts: the debiased methods, then the unbiased
    baselines.

    Returns
    -------
    list of str
        A new list; docs/choosing_a_method.md says which to pick.

    See Also
    --------
    compress : runs one of them.

    Examples
    --------
    >>> import stein_coreset as sc
    >>> sc.available_methods()
    ['st', 'skt', 'lskt', 'sr', 'lsr', 'sc', 'lsc', 'standard', 'iid', 'kt', 'compresspp',
     'rt', 'ct']
    """
    return list(METHODS)


# ---- compress ------------------------------------------------------------------------------


def _check_method(method) -> Method:
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid methods: {', '.join(METHODS)}")
    return METHODS[method]


def _check_options(method: str, spec: Method, options: dict) -> dict:
    """Every option of the method, validated, with defaults filled in; unknown ones raise."""
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        valid = ", ".join(spec.options) or "none"
        raise TypeError(
            f"unknown option(s) for method {method!r}: {', '.join(unknown)} "
            f"(its options: {valid})"
        )
    return {
        name: opt.validate(options.get(name, opt.default), name)
        for name, opt in spec.options.items()
    }


def _check_kernel_type(kernel):
    if kernel is not None and not isinstance(kernel, (SteinKernel, RadialKernel)):
        raise TypeError(
            f"kernel must be a SteinKernel or base kernel, got {type(kernel).__name__}"
        )


def _stein_problem(stein, X, S, n_threads: int) -> Problem:
    K = stein.bind(X, S, n_threads=n_threads, check_input=False)
    if not K.diag_is_finite():
        raise ValueError(
            "S: the Stein kernel overflowed on the diagonal (|S|^2 k(0) is not finite); "
            "the scores are too large for float64 — rescale X and S"
        )
    return Problem(K.n, K=K, n_threads=n_threads)


def _centred_problem(stein, X, S, n_threads: int) -> Problem:
    K = centred_kernel_matrix(stein.base, X, stein.M, n_threads=n_threads, check_input=False)
    return Problem(K.n, K=K, n_threads=n_threads)


def _base_problem(stein, X, S, n_threads: int) -> Problem:
    """Radial in the M-norm: the base kernel on whitened points."""
    xp, dev = aa.namespace(X=X)
    U = Whitening(stein.M, X.shape[1], xp, dev).points(X)
    return Problem(int(X.shape[0]), base=stein.base, U=U, n_threads=n_threads)


#: A method's ``target`` -> the :class:`~stein_coreset.methods.Problem` its pipeline runs on.
_TARGETS = {
    "stein": _stein_problem,
    "centred": _centred_problem,
    "base": _base_problem,
    "none": lambda stein, X, S, n_threads: Problem(int(X.shape[0]), n_threads=n_threads),
}


def _resolve_kernel(kernel, X, n_threads: int) -> SteinKernel:
    """The Stein kernel of this call with its bandwidth (and a ``"scale"`` preconditioner) fixed
    on X (a new object when anything is resolved; the caller's kernel is never changed). Its
    base is also the base kernel of the unbiased baselines.

    ``None``: ``stein_coreset.kernels.DEFAULT_KERNEL`` (scale-free); a base kernel alone:
    identity M (its sigma was chosen in the coordinates of X); a ``SteinKernel``: its own M
    (``None`` = identity)."""
    if kernel is None:
        kernel = DEFAULT_KERNEL
    if isinstance(kernel, RadialKernel):
        return SteinKernel(kernel)
    return kernel.resolve(X, check_input=False, n_threads=n_threads)


def _kernel_info(requested, stein: SteinKernel) -> dict:
    """res.info entries of the resolved kernel: bandwidth, preconditioner kind and its diagonal,
    and the kernel itself (``info["stein_kernel"]`` reproduces res.ksd through ``sc.ksd``)."""
    req_M = getattr(requested, "M", None) if requested is not None else "scale"
    if isinstance(req_M, str):
        pre = "scale"
    elif stein.M is None:
        pre = "identity"
    else:
        pre = "given"
    out = {
        "bandwidth": float(stein.base.sigma),
        "kernel": repr(stein),
        "stein_kernel": stein,
        "preconditioner": pre,
    }
    if pre == "scale":
        out["scale"] = np.sqrt(np.asarray(stein.M, dtype=np.float64)).tolist()
    return out


def _check_rank(rank, method: str, spec: Method, size: int, n: int, what: str = "rank") -> int:
    if spec.thin == "rt" and spec.debias != "ld" and not 1 <= rank <= size - 1:
        raise ValueError(
            f"{what} must be between 1 and size - 1 = {size - 1} for method {method!r} "
            f"(the Recombination test-vector count), got {rank}"
        )
    if spec.thin == "ct" and spec.debias != "ld" and not 1 <= rank <= size:
        raise ValueError(
            f"{what} must be between 1 and size = {size} for method {method!r} "
            f"(the Cholesky pivot count), got {rank}"
        )
    return rank


#: AMD steps beyond which its O(1/T^2) suboptimality bound is below double precision (2^-52).
MAX_AMD_STEPS = 2**26


def _check_counts(method: str, spec: Method, opts: dict, n: int, rank: int | None) -> None:
    """Caps on the counts the Low-rank Debiasing methods can use, checked before any work."""
    if spec.debias != "ld":
        return
    r = rank if rank is not None else max(1, round(math.sqrt(n)))
    cap = max(3, math.ceil(n / r))
    if opts["rounds"] > cap:
        raise ValueError(
            f"rounds = {opts['rounds']} is more than method {method!r} can use: max(3, "
            f"ceil(n / rank)) = {cap} for n = {n} and rank = {r} (beyond it the rounds together "
            "draw more RPCholesky pivots than there are points; pass rank = n for an exact "
            "factor instead)"
        )
    steps = opts.get("steps")
    if steps is not None and steps > MAX_AMD_STEPS:
        raise ValueError(
            f"steps = {steps} is more than AMD can use: beyond {MAX_AMD_STEPS} = 2^26 steps its "
            "O(1/T^2) suboptimality bound is below double precision"
        )


def _check_cross_terms(xp, X, S) -> None:
    """The Stein kernel's cross terms (x_i - x_j) . s_j must stay finite in float64: refuse, with
    the argument named, points spread so far (or scores so large) that they overflow (before:
    "w has NaN or inf entries" from deep inside Low-rank Debiasing for one row at 1e308)."""
    spread = float(xp.max(xp.max(X, axis=0) - xp.min(X, axis=0)))
    top = float(xp.max(xp.abs(S)))
    d = int(X.shape[1])
    if not math.isfinite(spread) or (
        top > 0 and math.log(spread or 1.0) + math.log(top) + math.log(4 * d) > _LOG_MAX
    ):
        raise ValueError(
            f"X: the points span {spread:.3g} and the scores S reach {top:.3g}; their products "
            "in the Stein kernel overflow float64: rescale X (and S accordingly)"
        )


_LOG_MAX = math.log(np.finfo(np.float64).max)


def _check_memory(method: str, spec: Method, n: int, size: int, rank: int | None,
                  like=None) -> None:
    """Refuse, before any work, a run whose largest buffers exceed the memory they live in (the
    machine's, or the free memory of the CUDA device holding ``like``).

    The estimate is an upper bound on the peak of the buffers: Low-rank Debiasing's
    (n, r) factor (float64, and the copy AMD steps on: :func:`~stein_coreset.algorithms.amd.
    factor_bytes`); for RT / CT the (n', r) float64
    RPCholesky factor (n' <= n the support of the debiasing weights) and RT's (n', r + 1) moment
    matrix beside it, then for the final reweighting the (p, p) kernel block of the support
    (p <= r + 1 for RT, p <= r for CT), its Cholesky factor and an eigendecomposition fallback
    (four (p, p) arrays). The other steps need O(n + size) memory.
    """
    peak, what, arg = 0.0, [], "size"
    if spec.debias == "ld":
        r_ld = rank if rank is not None else max(1, round(math.sqrt(n)))

        peak = factor_bytes(n, r_ld, np if like is None else aa.namespace(X=like)[0])
        what.append(f"the ({n}, {r_ld}) Low-rank Debiasing factor")
        arg = "rank" if rank is not None else "size"
    if spec.thin in ("rt", "ct"):
        if spec.debias == "ld" or rank is None:
            r = size - 1 if spec.thin == "rt" else size
        else:
            r, arg = rank, "rank"
        p = min(n, r + 1 if spec.thin == "rt" else r)
        peak = max(peak, 8.0 * n * r * (2 if spec.thin == "rt" else 1), 32.0 * p * p)
        what.append(f"the ({n}, {r}) RPCholesky factor and ({p}, {p}) kernel blocks")
    if what:
        val.check_buffer(
            peak, arg,
            f"method {method!r} with n = {n}, size = {size}"
            + (f", rank = {rank}" if rank is not None else "") + f" ({' and '.join(what)})",
            like=like,
        )


def compress(
    X,
    S=None,
    size: int | None = None,
    method: str | None = None,
    *,
    kernel=None,
    weights=None,
    rank: int | None = None,
    seed=None,
    progress: bool | None = None,
    nan_policy: str = "raise",
    n_threads: int | None = None,
    tau: float | None = None,
    **options,
) -> Coreset:
    """Compress the sample X (with scores S = grad log p(X)) to at most ``size`` weighted points.

    Parameters
    ----------
    X : (n, d) array
        Input points, in sequence order (MCMC output), one point per row (n > d). Computed in
        float64: float32 or integer input is upcast, and points and draws come back float64.
        A pandas DataFrame or xarray DataArray gives ``res.points`` and ``res.draws`` of the
        same kind, with X's column labels and the labels of the rows taken.
    S : (n, d) array, optional
        Scores at X; required by the debiased methods, and used for ``res.ksd`` when given.
    size : int
        Coreset size m, 1 <= m <= n (required; by keyword, or positionally after S).
    method : str
        One of ``stein_coreset.methods.METHODS`` (``stein-coreset methods`` and the API
        reference's method table list each one with its options; required).
    kernel : SteinKernel or base kernel, optional
        Default (``stein_coreset.kernels.DEFAULT_KERNEL``, scale-free): the Stein kernel of
        IMQ(beta=-1/2) with the preconditioner M = diag(per-coordinate variance of X) and the median
        M-distance bandwidth (debiased methods), or that IMQ base in the same M-norm centred at the
        input (unbiased baselines). Rescaling a coordinate of X (and its scores inversely) selects
        the same points. ``SteinKernel(M=...)`` overrides M (``M=None``: the identity); a base
        kernel alone uses the identity. A kernel without a bandwidth is resolved once per call into
        a new object (never changed in place): ``res.info["bandwidth"]``,
        ``res.info["preconditioner"]`` ("scale" | "identity" | "given"), ``res.info["scale"]``
        (the per-coordinate standard deviations of "scale"), and the kernel itself,
        ``res.info["stein_kernel"]`` (``sc.ksd(res.points, S[res.indices], res.weights,
        kernel=res.info["stein_kernel"])`` is ``res.ksd``).
    weights : (n,) array, optional
        Weights of the input sample, for the methods that accept them ("rt", "ct").
    rank : int, optional
        Rank of the low-rank methods (default ceil(n^0.4), see ``tau``), or the RT / CT
        test-vector count of "sr", "sc", "rt", "ct" (default size - 1 for RT, size for CT;
        ``RANKED_METHODS``).
    tau : float in (0, 1], optional
        For the ranked methods: ``rank = ceil(n^tau)``. Default: 0.4 for the Low-rank Debiasing
        rank of lskt, lsr, lsc (``LD_DEFAULT_TAU``, sub-quadratic; measured faster than
        0.5 at equal KSD); 0.5 (the size) for the RT / CT counts of sr, sc, rt, ct. An explicit
        ``rank`` wins.
    seed : None, int >= 0 or numpy.random.Generator, optional
    progress : bool or None
        ``True``: a line on stderr when the method starts and ends, and a bar for each stage
        longer than half a second. Default ``None``: the bars alone when stderr is a terminal,
        silent otherwise (pipes, files, CI). ``False``: silent.
    nan_policy : {"raise", "omit"}
        "omit" drops rows with NaN/inf in X or S and reports the count in ``res.info``.
    n_threads : int, optional
        Threads of the compiled loops (default, or -1: the cores this process may use).
        Results do not depend on it.
    **options
        The method's options (``METHODS[method].options``); an unknown one raises ``TypeError``
        before any work.

    Returns
    -------
    Coreset
        With ``res.info["diagnostics"]`` (Stein's identity on the input and the debiased result:
        :func:`stein_coreset.diagnostics.check_scores`, which warns with
        :class:`~stein_coreset.DiagnosticWarning` naming a likely misuse) when S is given, and
        ``res.info["stages"]`` (each stage's KSD and the candidate that won) for skt, lskt, sr,
        lsr, sc and lsc; ``res.summary()`` prints both in one line.

    Notes
    -----
    Every argument is validated here, once, before any work (one NaN scan of X and S); the
    pipelines then run on trusted inputs.

    See Also
    --------
    available_methods : the method names.
    ksd : the discrepancy ``res.ksd`` reports.
    stein_coreset.distributed.compress : the same on Dask, for chains that do not fit.

    Examples
    --------
    A biased sample (N(0.7, 1.5^2 I) drawn for the target P = N(0, I), whose score is -x):

    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = 0.7 + 1.5 * np.random.default_rng(0).standard_normal((1024, 2))
    >>> res = sc.compress(X, -X, 32, "skt", seed=0)
    >>> res.draws.shape                                  # the equal-weight sample
    (32, 2)
    >>> bool(np.abs(res.draws.mean(axis=0)).max() < 0.1)  # debiased: P's mean is 0
    True
    >>> res.info["stages"]["winner"]                     # which candidate KT-Swap kept
    'baseline'
    >>> print(res.summary())
    skt: 30 points (equal weights), KSD 0.03648; stages: stein_thinning 0.00519,
    kt_split 0.165, baseline 0.113, kt_swap 0.0365; baseline won
    """
    # -- scalar arguments and options: all checked before any array work ------------------
    for name, value in (("size", size), ("method", method)):
        if value is None:
            raise TypeError(f"compress() missing required argument: {name!r}")
    spec = _check_method(method)
    opts = _check_options(method, spec, options)
    _check_kernel_type(kernel)
    size = val.check_int(size, "size")  # its bounds once n is known
    if rank is not None:
        if not spec.uses_rank:
            raise ValueError(
                f"rank: method {method!r} has no rank; rank applies to {', '.join(RANKED_METHODS)}"
            )
        rank = val.check_int(rank, "rank")
    if tau is not None:
        if not spec.uses_rank:
            raise ValueError(
                f"tau: method {method!r} has no rank; tau applies to {', '.join(RANKED_METHODS)}"
            )
        tau = val.check_real(tau, "tau", lo=0.0, hi=1.0, lo_open=True)
    rng = val.check_random_state(seed, "seed")
    announce = progress is True  # the stage lines when asked for; bars alone by default
    progress = resolve_progress(progress)
    val.check_choice(nan_policy, "nan_policy", ("raise", "omit"))
    n_threads = effective_n_threads(n_threads)
    if weights is not None and not spec.takes_weights:
        takers = ", ".join(repr(k) for k, v in METHODS.items() if v.takes_weights)
        raise ValueError(
            f"weights: method {method!r} does not take input weights (the debiased methods "
            f"compute their own from the scores); methods that do: {takers}"
        )
    if S is None and spec.debiased:
        raise ValueError(f"method {method!r} is debiased and needs the scores S = grad log p(X)")

    labelled = _row_labels(X)
    # -- arrays: host array-likes converted once (masked rows as NaN rows under "omit"), one
    # namespace lookup, one NaN/inf scan (the row mask only when it fails) --
    X = val.masked_as_nan(X, "X", nan_policy)
    S = val.masked_as_nan(S, "S", nan_policy)
    X, S, weights = aa.as_arrays(X=X, S=S, weights=weights)
    xp, dev = aa.namespace(X=X, S=S, weights=weights)
    X = val.check_points(X, xp, "X", allow_nonfinite=True)
    if S is not None:
        S = val.check_scores(S, X, xp, "S", allow_nonfinite=True)
    n_all = int(X.shape[0])
    if weights is not None:  # on all n rows, as given; renormalised below if rows are dropped
        weights = val.check_weights(weights, n_all, xp, simplex=True, device=dev)
    info: dict = {}
    keep = None
    n_bad = 0
    if not val.all_finite(xp, X, S):
        bad = val.nonfinite_rows(xp, X)
        if S is not None:
            bad = bad | val.nonfinite_rows(xp, S)
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
        if weights is not None:
            weights = xp.take(weights, keep, axis=0)
            kept = float(xp.sum(weights))
            if not kept > 0.0:
                raise ValueError(
                    "weights: every row with positive weight has NaN or inf in X or S"
                )
            weights = weights / kept
            info["weight_dropped"] = 1.0 - kept
        info["n_dropped"] = n_bad
    n = int(X.shape[0])
    check_orientation(n, int(X.shape[1]))
    size = val.check_size(size, n)
    if rank is not None:
        rank = _check_rank(val.check_size(rank, n, "rank"), method, spec, size, n)
    elif tau is not None or spec.debias == "ld":
        if tau is None:
            tau = LD_DEFAULT_TAU
        rank = min(n, max(1, math.ceil(n**tau - 1e-9)))
        _check_rank(rank, method, spec, size, n, f"rank = ceil(n^tau) = {rank}")
        info["rank_from_tau"] = rank
        info["tau"] = tau
    if opts.get("stop") == "auto":
        opts["stop"] = "fixed" if n <= STOP_AUTO_FIXED_MAX_N else "ksd"
        info["stop"] = opts["stop"]
    if weights is not None:
        weights = val.check_weights(weights, n, xp, simplex=True, device=dev)
    if spec.target == "stein":
        _check_cross_terms(xp, X, S)
    _check_counts(method, spec, opts, n, rank)
    _check_memory(method, spec, n, size, rank, like=X)

    # -- the kernel, resolved once: selection and res.ksd use the same one ----------------
    stein = _resolve_kernel(kernel, X, n_threads)
    info.update(_kernel_info(kernel, stein))

    t0 = time.perf_counter()
    if announce:
        stage(f"stein_coreset.compress: {method} ({spec.summary}) on n = {n}, d = "
              f"{X.shape[1]}, size {size}, {n_threads} threads ...")
    args = dict(opts)
    if spec.uses_rank:
        args["rank"] = rank
    if spec.takes_weights:
        args["weights"] = weights
    if spec.takes_progress:
        args["progress"] = progress
    problem = _TARGETS[spec.target](stein, X, S, n_threads)
    idx, w, extra = spec.run(problem, size, rng, **args)
    info.update(extra)
    info["n_threads"] = n_threads
    info["time_s"] = time.perf_counter() - t0
    if announce:
        stage(f"stein_coreset.compress: {method} done in {info['time_s']:.2f} s")

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
        sub = stein.bind(
            points, xp.take(S, local_dev, axis=0), n_threads=n_threads, check_input=False
        )
        res_ksd = finite_discrepancy(sub.quad(weights_out), "res.ksd")
        # the result's own residuals judge the scores only where it was debiased with them
        info["diagnostics"] = (check_scores(X, S, weights_out, local_dev) if spec.debiased
                               else check_scores(X, S))
    indices = aa.from_host(original, xp=xp, device=dev)
    draw_indices = draws = None
    if spec.kind == "equal":  # the m picks, repeats kept (chain order)
        counts = equal_draw_counts(w, int(info.get("size_used", size)), method)
        draw_indices = aa.from_host(np.repeat(original, counts), xp=xp, device=dev)
        draws = xp.take(X, aa.from_host(np.repeat(local, counts), xp=xp, device=dev), axis=0)
    if labelled is not None:
        points = labelled(points, original)
        if draws is not None:
            draws = labelled(draws, aa.to_host(draw_indices, np.int64))
    return Coreset(
        indices, weights_out, points, spec.kind, method, res_ksd, info, draw_indices, draws
    )


def _row_labels(X):
    """For a pandas DataFrame or a 2-D xarray DataArray ``X``: a function ``(rows, idx) ->``
    the same kind of object holding ``rows`` (NumPy, one per index of ``idx`` into X's rows)
    with X's column labels and the labels of those rows; None for any other input."""
    if type(X).__name__ == "DataFrame" and hasattr(X, "columns") and hasattr(X, "index"):
        import pandas as pd

        index, columns = X.index, X.columns
        return lambda rows, idx: pd.DataFrame(np.asarray(rows), index=index[idx],
                                              columns=columns)
    if type(X).__name__ == "DataArray" and getattr(X, "ndim", 0) == 2:
        import xarray as xr

        dims = X.dims
        coords = {k: c for k, c in X.coords.items() if c.dims in ((dims[0],), (dims[1],))}

        def wrap(rows, idx):
            take = {k: (c[idx] if c.dims == (dims[0],) else c) for k, c in coords.items()}
            return xr.DataArray(np.asarray(rows), dims=dims, coords=take, name=X.name)

        return wrap
    return None

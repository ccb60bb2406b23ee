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

import numpy as np

from . import _array_api as aa
from . import _validation as val
from ._progress import resolve as resolve_progress
from ._progress import stage
from ._threads import effective_n_threads
from .coreset import Coreset, equal_draw_counts
from .diagnostics import check_orientation, check_scores
from .discrepancy import finite_discrepancy
from .kernels import DEFAULT_KERNEL, RadialKernel, SteinKernel
from .methods import METHODS, RANKED_METHODS, Method, Option

__all__ = [
    "compress",
    "Coreset",
    "Method",
    "Option",
    "METHODS",
    "RANKED_METHODS",
    "available_methods",
    "equal_draw_counts",
]


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


def _check_memory(method: str, spec: Method, n: int, size: int, rank, like) -> None:
    """Refuse, before any work, a run whose largest buffers (the method's estimate,
    :meth:`~stein_coreset.methods.Method.peak`, an upper bound) exceed the memory they live in
    (the machine's, or the free memory of the CUDA device holding ``like``)."""
    peak, what, arg = spec.peak(n, size, rank, aa.namespace(X=like)[0])
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
    diagnostics: bool = True,
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
    diagnostics : bool
        Check the scores (default): whether S is a score field of X and Stein's identity on
        the input and on the debiased result (:func:`stein_coreset.diagnostics.check_scores`,
        which warns with :class:`~stein_coreset.DiagnosticWarning` naming a likely misuse).
        ``False`` skips the checks; ``res.info["diagnostics"]`` then says so
        (``{"checked": False, ...}``, no figures).
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
        With ``res.info["diagnostics"]`` (the figures of
        :func:`stein_coreset.diagnostics.check_scores`, which warns with
        :class:`~stein_coreset.DiagnosticWarning` naming a likely misuse, and the ``"suspect"``
        it names, or ``{"checked": False, ...}`` with ``diagnostics=False``) when S is given, and
        ``res.info["stages"]`` (each stage's KSD and size in distinct points, and, for skt and
        lskt, the coreset KT-Swap kept among those of the same number of picks) for skt, lskt,
        sr, lsr, sc and lsc; ``res.summary()`` prints both in one line.

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
    'kt_split'
    >>> print(res.summary())
    skt: 31 points (equal weights), KSD 0.03188; stages: stein_thinning 0.00519 (464 points),
    kt_split 0.165 (32 points), baseline 0.113 (31 points), kt_swap 0.0319 (31 points); of the
    coresets of 32 picks compared after KT-Swap, kt_split won
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
    diagnostics = val.check_bool(diagnostics, "diagnostics")
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
        rank = spec.check_rank(method, val.check_size(rank, n, "rank"), size)
    elif tau is not None or spec.default_tau is not None:
        if tau is None:
            tau = spec.default_tau
        rank = min(n, max(1, math.ceil(n**tau - 1e-9)))
        spec.check_rank(method, rank, size, f"rank = ceil(n^tau) = {rank}")
        info["rank_from_tau"] = rank
        info["tau"] = tau
    for name, opt in spec.options.items():  # values that depend on n ("auto")
        if opt.resolve is not None and (value := opt.resolve(opts[name], n)) != opts[name]:
            opts[name] = info[name] = value
    if weights is not None:
        weights = val.check_weights(weights, n, xp, simplex=True, device=dev)
    if spec.target.check is not None:
        spec.target.check(xp, X, S)
    for check in spec.checks:
        check(method, opts, n, rank)
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
    problem = spec.target.build(stein, X, S, n_threads)
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
        if not diagnostics:
            info["diagnostics"] = {"checked": False, "input": None, "field": None,
                                   "coreset": None, "suspect": None}
        elif spec.debiased:
            info["diagnostics"] = check_scores(X, S, weights_out, local_dev)
        else:
            info["diagnostics"] = check_scores(X, S)
    indices = aa.from_host(original, xp=xp, device=dev)
    draw_indices = draws = None
    if spec.equal_weighted:  # the m picks, repeats kept (chain order)
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

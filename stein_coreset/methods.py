"""The method table: every method name of :func:`stein_coreset.compress`, as a row that carries
its own rules.

:data:`METHODS` maps each name to a :class:`Method`: its debiasing step {none, ST, LD} and
thinning step {none, standard, iid, KT, KT-Compress++, RT, CT} (descriptive, for the docs), the
weight kind, the :class:`Target` its pipeline runs on (which builds the kernel matrix and checks
the input for it), the range of an explicit rank, the default ``tau``, the memory estimate, the
checks of its counts, its options with defaults, checks and one-line docs, and its pipeline. The
only place that maps method names to pipelines and rules: :func:`stein_coreset.compress`
validates the input once, asks the row, and calls it, with no rule of its own for a method. The
pipeline bodies live in :mod:`stein_coreset.algorithms` as functions of plain arguments
(kernel matrix, sizes, rng, options). The method table of the API reference
(docs/api/methods.md) is generated from this one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from . import _array_api as aa
from . import _validation as val
from .algorithms.amd import factor_bytes
from .algorithms.compresspp import SWAP_TARGETS, compresspp_coreset
from .algorithms.debias import STOP_RULES
from .algorithms.kernel_thinning import DELTA_RULES, SWAP_ORDERS, kernel_thinning_coreset
from .algorithms.lskt import low_rank_stein_kernel_thinning
from .algorithms.resample import iid_thinning, standard_thinning
from .algorithms.skt import stein_kernel_thinning
from .algorithms.stein_thinning import stein_thinning_coreset
from .algorithms.weighted import weighted_compression
from .algorithms.weights import centre_at_weights
from .engine import Whitening
from .kernels import centred_kernel_matrix

__all__ = [
    "Method",
    "Option",
    "Target",
    "Problem",
    "METHODS",
    "RANKED_METHODS",
    "LD_DEFAULT_TAU",
    "STOP_AUTO_FIXED_MAX_N",
]


@dataclass(frozen=True)
class Option:
    """A method option: its default, a one-line doc, the check that validates a value, and
    ``resolve(value, n)``, which turns a value that depends on the input's size (``"auto"``)
    into the one the pipeline gets."""

    default: Any
    doc: str
    check: Callable[[Any, str], Any]
    resolve: Callable[[Any, int], Any] | None = None

    def validate(self, value, name: str):
        return value if value is None and self.default is None else self.check(value, name)


@dataclass(frozen=True)
class Problem:
    """What a method's pipeline runs on, built once by ``compress`` for the method's target:
    ``n`` points, the kernel matrix ``K`` ("stein", "centred"), or the base kernel ``base`` and
    the whitened points ``U`` ("base"), and the team size ``n_threads``."""

    n: int
    K: Any = None
    base: Any = None
    U: Any = None
    n_threads: int = 1


@dataclass(frozen=True)
class Target:
    """The kernel a method's pipeline reads: ``build(stein, X, S, n_threads)`` makes the
    :class:`Problem` from the resolved Stein kernel and the validated input, and ``check(xp, X,
    S)``, when given, refuses (before any work) an input that kernel cannot be evaluated on."""

    name: str
    build: Callable[..., Problem]
    check: Callable[..., None] | None = None


_LOG_MAX = math.log(np.finfo(np.float64).max)


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


#: k_p at (X, S): the debiased methods.
STEIN = Target("stein", _stein_problem, _check_cross_terms)
#: The base kernel centred at the input (O(n^2) to build): the unbiased KT, RT and CT baselines.
CENTRED = Target("centred", _centred_problem)
#: The base kernel itself on whitened points: Compress++, which centres only where it needs to.
BASE = Target("base", _base_problem)
#: No kernel: the index-only baselines.
NO_KERNEL = Target("none", lambda stein, X, S, n_threads: Problem(int(X.shape[0]),
                                                                    n_threads=n_threads))


#: A memory estimate ``(n, size, rank, xp) -> [(peak bytes, what, argument to blame)]``.
Memory = Callable[[int, int, Any, Any], list]


def _ld_memory(n: int, size: int, rank, xp) -> list:
    """Low-rank Debiasing's (n, r) float64 factor and the copy AMD steps on
    (:func:`~stein_coreset.algorithms.amd.factor_bytes`)."""
    r = rank if rank is not None else max(1, round(math.sqrt(n)))
    return [(factor_bytes(n, r, xp), f"the ({n}, {r}) Low-rank Debiasing factor",
             "rank" if rank is not None else "size")]


def _thinning_memory(recombination: bool, rank_is_count: bool) -> Memory:
    """RT's (n', r) RPCholesky factor and (n', r + 1) moment matrix beside it, or CT's factor,
    then the final reweighting's (p, p) kernel block of the support (p <= r + 1 for RT, p <= r
    for CT), its Cholesky factor and an eigendecomposition fallback (four (p, p) arrays);
    ``rank_is_count``: an explicit rank is the test-vector count (not LD's rank)."""

    def memory(n: int, size: int, rank, xp) -> list:
        if rank is None or not rank_is_count:
            r, arg = (size - 1 if recombination else size), "size"
        else:
            r, arg = rank, "rank"
        p = min(n, r + 1 if recombination else r)
        peak = max(8.0 * n * r * (2 if recombination else 1), 32.0 * p * p)
        return [(peak, f"the ({n}, {r}) RPCholesky factor and ({p}, {p}) kernel blocks", arg)]

    return memory


#: AMD steps beyond which its O(1/T^2) suboptimality bound is below double precision (2^-52).
MAX_AMD_STEPS = 2**26


def _check_ld_counts(method: str, opts: dict, n: int, rank) -> None:
    """Caps on the counts the Low-rank Debiasing methods can use, checked before any work."""
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


@dataclass(frozen=True, kw_only=True)
class Method:
    """One row of the method table (see the module docstring).

    ``target`` is the :class:`Target` the pipeline gets (:data:`STEIN`, :data:`CENTRED`,
    :data:`BASE` or :data:`NO_KERNEL`). ``run(problem, size, rng, **args)`` calls the pipeline
    of :mod:`stein_coreset.algorithms` on the :class:`Problem` compress built for that target and
    returns ``(indices, weights, info)`` on the host. ``rank_limit(size) -> (most, formula,
    role)``, when given, bounds an explicit rank that is a test-vector count; ``default_tau``
    sets the rank ``ceil(n^tau)`` when no rank is given; ``memory`` are the estimates of the
    buffers the pipeline allocates (:data:`Memory`), and ``checks`` the caps on its counts
    (``(method, options, n, rank) -> None``), all run before any work.
    """

    summary: str
    debias: str  # "none" | "st" | "ld"
    thin: str  # "none" | "standard" | "iid" | "kt" | "compresspp" | "rt" | "ct"
    kind: str  # "equal" | "simplex" | "constant"
    target: Target
    run: Callable[..., tuple]
    options: Mapping[str, Option] = field(default_factory=dict)
    takes_weights: bool = False
    uses_rank: bool = False
    takes_progress: bool = False
    rank_limit: Callable[[int], tuple[int, str, str]] | None = None
    default_tau: float | None = None
    memory: tuple[Memory, ...] = ()
    checks: tuple[Callable[..., None], ...] = ()

    @property
    def debiased(self) -> bool:
        """Whether the method targets P through the scores (and so needs S)."""
        return self.debias != "none"

    @property
    def equal_weighted(self) -> bool:
        """Whether the result is m picks with repeats (``res.draws`` is a sample)."""
        return self.kind == "equal"

    def check_rank(self, method: str, rank: int, size: int, what: str = "rank") -> int:
        """``rank`` within the method's limit for ``size`` (:attr:`rank_limit`), else a
        ValueError naming ``what``."""
        if self.rank_limit is not None:
            most, expr, role = self.rank_limit(size)
            if not 1 <= rank <= most:
                raise ValueError(
                    f"{what} must be between 1 and {expr} = {most} for method {method!r} "
                    f"({role}), got {rank}"
                )
        return rank

    def peak(self, n: int, size: int, rank, xp) -> tuple[float, list, str]:
        """``(bytes, what, argument)``: the largest buffers' bytes, their descriptions and the
        argument to blame (:attr:`memory`); ``(0, [], "size")`` for a method of O(n + size)
        memory."""
        parts = [e for estimate in self.memory for e in estimate(n, size, rank, xp)]
        if not parts:
            return 0.0, [], "size"
        return (max(p for p, _, _ in parts), [w for _, w, _ in parts],
                "rank" if any(a == "rank" for _, _, a in parts) else "size")


def _on_matrix(pipeline):
    """A pipeline ``f(K, size, rng, **args)`` as a method's ``run``."""
    return lambda p, size, rng, **args: pipeline(p.K, size, rng, **args)


def _int_at_least(lo):
    return lambda v, name: val.check_int(v, name, lo=lo)


_check_bool = val.check_bool
_DELTA = Option(
    0.5,
    "KT failure probability delta in (0, 1) (App. I.2: 1/2)",
    lambda v, name: val.check_real(v, name, lo=0.0, hi=1.0, lo_open=True, hi_open=True),
)
_SWAP_PASSES = Option(1, "KT-Swap sweeps over the coreset (Alg. D.3 makes one)", _int_at_least(1))
_SWAP_PASSES_P = Option(
    4,
    "KT-Swap sweeps over the coreset (Alg. D.3 makes one; each further sweep costs O(n m) "
    "kernel evaluations, stops early when nothing changes, and lowers the KSD: docs/quality.md)",
    _int_at_least(1),
)
_SWAP_PASSES_CPP = Option(
    4,
    "KT-Swap sweeps over the COMPRESS output (each further sweep costs O(|C| m) kernel "
    "evaluations and stops early when nothing changes; one sweep left the MMD to the input 2-18% "
    "above goodpoints' compresspp_kt, whose halvings each refine by swaps: "
    "docs/experiments/compresspp_gap.py)",
    _int_at_least(1),
)
_SWAP_CANDIDATES = Option(
    "auto",
    "how many of KT-SPLIT's candidates KT-Swap refines beside Stein thinning's baseline: a "
    "positive int, or 'auto' (4 up to d = 16, 1 above: "
    "stein_coreset.algorithms.skt.swap_candidates); Alg. D.3 refines one",
    lambda v, name: v if v == "auto" else val.check_int(v, name, lo=1),
)
_SWAP_ORDER = Option(
    "sorted",
    "KT-Swap sweep order: 'sorted' (increasing index, every sweep, as goodpoints) or 'given' "
    "(the candidate's own order, e.g. Stein thinning's selection order)",
    lambda v, name: val.check_choice(v, name, SWAP_ORDERS),
)
_DELTA_RULE = Option(
    "total",
    "KT-SPLIT's delta: 'total' (the run's failure probability, delta_i = delta / n', the "
    "paper's Alg. D.2 / Lem. F.4) or 'per_step' (every walk step's delta_i, as goodpoints.jax)",
    lambda v, name: val.check_choice(v, name, DELTA_RULES),
)
_STANDARD_THIN = Option(
    True, "Rem. 2: when size^2 < n, standard-thin the input to size^2 points first", _check_bool
)
_G = Option(4, "Compress++ oversampling parameter g (App. I.2: 4)", _int_at_least(0))
_ROUNDS = Option(3, "Low-rank Debiasing adaptive rounds Q (App. I.2: 3)", _int_at_least(1))
_STEPS = Option(
    None, "AMD steps T per round (default ceil(7 sqrt(n)), App. I.2)", _int_at_least(0)
)
_SWAP_TARGET = Option(
    "input",
    "THIN / KT-Swap target: 'input' (input mean embedding at the COMPRESS output), "
    "'compress' (the COMPRESS output's own distribution) or 'input_all' (exact, O(n^2))",
    lambda v, name: val.check_choice(v, name, SWAP_TARGETS),
)


def _run_standard(p, size, rng):
    idx = standard_thinning(p.n, size)
    return idx, np.full(idx.shape[0], 1.0 / idx.shape[0]), {}


def _run_iid(p, size, rng):
    return iid_thinning(p.n, size, rng), np.full(size, 1.0 / size), {}


def _run_compresspp(p, size, rng, **options):
    return compresspp_coreset(p.base, p.U, size, rng, n_threads=p.n_threads, **options)


def _run_weighted(debias, thin):
    def run(p, size, rng, *, rank=None, weights=None, progress=False, **options):
        K = p.K
        if debias == "none":
            K = centre_at_weights(K, weights)
        return weighted_compression(
            K, size, rng, debias=debias, thin=thin, rank=rank, weights=weights,
            progress=progress, **options,
        )

    return run


#: Largest n at which ``stop="auto"`` runs AMD for a fixed number of steps: measured
#: (docs/experiments/lskt_tau.py) at n = 2^12 and 2^13, "ksd" took 2.5-5x the time of "fixed" for no
#: lower KSD.
STOP_AUTO_FIXED_MAX_N = 2**13
_STOP = Option(
    "auto",
    "AMD stopping rule: 'ksd' (watch a resampled KSD of the true kernel every 32 steps, keep the "
    "best iterate, stop when it no longer improves; steps is the cap), 'fixed' (exactly steps "
    "per round, App. I.2) or 'auto' (default: 'fixed' for n <= 2^13, where watching costs more "
    "than it saves, else 'ksd')",
    lambda v, name: val.check_choice(v, name, (*STOP_RULES, "auto")),
    lambda v, n: ("fixed" if n <= STOP_AUTO_FIXED_MAX_N else "ksd") if v == "auto" else v,
)
#: Default ``tau`` (rank = ceil(n^tau)) of Low-rank Debiasing in lskt / lsr / lsc: the paper's
#: 0.4. Measured (docs/experiments/lskt_tau.py --n 15 16 --pairs skt:lskt sr:lsr sc:lsc
#: --taus 0.4, 3 seeds, m = sqrt(n), medians of the per-seed ratios): at n = 2^15 lskt / lsr /
#: lsc take 0.31 / 0.53 / 0.60 of the time of skt / sr / sc at a KSD 1.00 / 0.98 / 0.99 times
#: theirs; at 2^16 0.29 / 0.54 / 0.64 of the time at 1.00 / 1.02 / 1.12 times the KSD.
LD_DEFAULT_TAU = 0.4
_LD_OPTIONS = MappingProxyType({"rounds": _ROUNDS, "steps": _STEPS, "stop": _STOP})


def _rt_rank(size: int) -> tuple[int, str, str]:
    return size - 1, "size - 1", "the Recombination test-vector count"


def _ct_rank(size: int) -> tuple[int, str, str]:
    return size, "size", "the Cholesky pivot count"


#: What each debiasing and thinning step adds to a row: Low-rank Debiasing's default tau,
#: memory and count checks; RT's and CT's rank limit and memory (their rank is LD's when both).
_LD = {"default_tau": LD_DEFAULT_TAU, "checks": (_check_ld_counts,)}
_RT_MEMORY = _thinning_memory(recombination=True, rank_is_count=True)
_CT_MEMORY = _thinning_memory(recombination=False, rank_is_count=True)

#: Method name -> its row. Order: the debiased methods, then the unbiased baselines (the order of
#: the API reference's method table, docs/api/methods.md, which is generated from this one).
METHODS: Mapping[str, Method] = MappingProxyType(
    {
        "st": Method(
            summary="Stein thinning, greedy (Alg. D.1)",
            debias="st", thin="none", kind="equal", target=STEIN,
            run=lambda p, size, rng, progress=False: stein_thinning_coreset(
                p.K, size, progress=progress
            ),
            takes_progress=True,
        ),
        "skt": Method(
            summary="Stein kernel thinning: ST then KT targeting P (Alg. 1)",
            debias="st", thin="kt", kind="equal", target=STEIN,
            run=_on_matrix(stein_kernel_thinning),
            options=MappingProxyType(
                {"delta": _DELTA, "standard_thin": _STANDARD_THIN, "swap_passes": _SWAP_PASSES_P,
                 "swap_order": _SWAP_ORDER, "delta_rule": _DELTA_RULE,
                 "swap_candidates": _SWAP_CANDIDATES}
            ),
            takes_progress=True,
        ),
        "lskt": Method(
            summary="low-rank SKT: LD, Resample, KT-Compress++ targeting P (Alg. 3)",
            debias="ld", thin="compresspp", kind="equal", target=STEIN,
            run=_on_matrix(low_rank_stein_kernel_thinning),
            options=MappingProxyType(
                {**_LD_OPTIONS, "g": _G, "delta": _DELTA, "standard_thin": _STANDARD_THIN,
                 "swap_passes": _SWAP_PASSES_P, "swap_order": _SWAP_ORDER,
                 "delta_rule": _DELTA_RULE}
            ),
            uses_rank=True, takes_progress=True, memory=(_ld_memory,), **_LD,
        ),
        "sr": Method(
            summary="Stein Thinning, then Recombination Thinning (Alg. 5)",
            debias="st", thin="rt", kind="simplex", target=STEIN,
            run=_run_weighted("st", "rt"),
            uses_rank=True, takes_progress=True, rank_limit=_rt_rank, memory=(_RT_MEMORY,),
        ),
        "lsr": Method(
            summary="Low-rank Debiasing, then Recombination Thinning (Alg. 5)",
            debias="ld", thin="rt", kind="simplex", target=STEIN,
            run=_run_weighted("ld", "rt"), options=_LD_OPTIONS,
            uses_rank=True, takes_progress=True, **_LD,
            memory=(_ld_memory, _thinning_memory(recombination=True, rank_is_count=False)),
        ),
        "sc": Method(
            summary="Stein Thinning, then Cholesky Thinning (Alg. 7)",
            debias="st", thin="ct", kind="constant", target=STEIN,
            run=_run_weighted("st", "ct"),
            uses_rank=True, takes_progress=True, rank_limit=_ct_rank, memory=(_CT_MEMORY,),
        ),
        "lsc": Method(
            summary="Low-rank Debiasing, then Cholesky Thinning (Alg. 7)",
            debias="ld", thin="ct", kind="constant", target=STEIN,
            run=_run_weighted("ld", "ct"), options=_LD_OPTIONS,
            uses_rank=True, takes_progress=True, **_LD,
            memory=(_ld_memory, _thinning_memory(recombination=False, rank_is_count=False)),
        ),
        "standard": Method(
            summary="keep every n/size-th point",
            debias="none", thin="standard", kind="equal", target=NO_KERNEL,
            run=_run_standard,
        ),
        "iid": Method(
            summary="uniform subsample without replacement",
            debias="none", thin="iid", kind="equal", target=NO_KERNEL,
            run=_run_iid,
        ),
        "kt": Method(
            summary="kernel thinning of the input (Alg. D.2, centred kernel)",
            debias="none", thin="kt", kind="equal", target=CENTRED,
            run=_on_matrix(kernel_thinning_coreset),
            options=MappingProxyType(
                {"delta": _DELTA, "swap_passes": _SWAP_PASSES, "swap_order": _SWAP_ORDER,
                 "delta_rule": _DELTA_RULE}
            ),
            takes_progress=True,
        ),
        "compresspp": Method(
            summary="KT-Compress++ of the input (Shetty et al.; Alg. F.3)",
            debias="none", thin="compresspp", kind="equal", target=BASE,
            run=_run_compresspp,
            options=MappingProxyType(
                {"g": _G, "delta": _DELTA, "standard_thin": _STANDARD_THIN,
                 "swap_target": _SWAP_TARGET, "swap_passes": _SWAP_PASSES_CPP}
            ),
            takes_progress=True,
        ),
        "rt": Method(
            summary="Recombination Thinning of the input (Alg. 4)",
            debias="none", thin="rt", kind="simplex", target=CENTRED,
            run=_run_weighted("none", "rt"),
            takes_weights=True, uses_rank=True, rank_limit=_rt_rank, memory=(_RT_MEMORY,),
        ),
        "ct": Method(
            summary="Cholesky Thinning of the input (Alg. 6)",
            debias="none", thin="ct", kind="constant", target=CENTRED,
            run=_run_weighted("none", "ct"),
            takes_weights=True, uses_rank=True, rank_limit=_ct_rank, memory=(_CT_MEMORY,),
        ),
    }
)

#: Methods whose ``rank`` (LD rank, or RT/CT test-vector count) ``rank`` / ``tau`` set.
RANKED_METHODS = tuple(name for name, m in METHODS.items() if m.uses_rank)

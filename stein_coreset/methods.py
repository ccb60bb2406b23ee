"""The method table: every method name of :func:`stein_coreset.compress` and its pipeline.

:data:`METHODS` is declarative: per method, its debiasing step {none, ST, LD}, its thinning step
{none, standard, iid, KT, KT-Compress++, RT, CT}, the weight kind, the kernel its pipeline needs,
whether it takes input weights or a rank, and its options with defaults and one-line docs. The
only place that maps method names to pipelines; the pipeline bodies live in
:mod:`stein_coreset.algorithms` as functions of plain arguments (kernel matrix, sizes, rng,
options), and :func:`stein_coreset.compress` validates the input once and calls them. The
method table of the API reference (docs/api/methods.md) is generated from this one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from . import _validation as val
from .algorithms.compresspp import SWAP_TARGETS, compresspp_coreset
from .algorithms.debias import STOP_RULES
from .algorithms.kernel_thinning import (
    DELTA_RULES,
    SWAP_ORDERS,
    kernel_thinning_coreset,
    stein_kernel_thinning,
)
from .algorithms.lskt import low_rank_stein_kernel_thinning
from .algorithms.resample import iid_thinning, standard_thinning
from .algorithms.stein_thinning import stein_thinning_coreset
from .algorithms.weighted import weighted_compression
from .algorithms.weights import centre_at_weights

__all__ = [
    "Method",
    "Option",
    "METHODS",
    "RANKED_METHODS",
    "LD_DEFAULT_TAU",
    "STOP_AUTO_FIXED_MAX_N",
]


@dataclass(frozen=True)
class Option:
    """A method option: its default, a one-line doc, and the check that validates a value."""

    default: Any
    doc: str
    check: Callable[[Any, str], Any]

    def validate(self, value, name: str):
        return value if value is None and self.default is None else self.check(value, name)


@dataclass(frozen=True, kw_only=True)
class Method:
    """One row of the method table (see the module docstring).

    ``target`` is the kernel the pipeline gets: "stein" (k_p at (X, S)), "centred" (the base
    kernel centred at the input, O(n^2) to build), "base" (the base kernel itself, for
    Compress++, which centres only where it needs to) or "none" (index-only methods).
    ``run(problem, size, rng, **args)`` calls the pipeline of :mod:`stein_coreset.algorithms`
    on the :class:`Problem` compress built for that target and returns ``(indices, weights,
    info)`` on the host.
    """

    summary: str
    debias: str  # "none" | "st" | "ld"
    thin: str  # "none" | "standard" | "iid" | "kt" | "compresspp" | "rt" | "ct"
    kind: str  # "equal" | "simplex" | "constant"
    target: str  # "stein" | "centred" | "base" | "none"
    run: Callable[..., tuple]
    options: Mapping[str, Option] = field(default_factory=dict)
    takes_weights: bool = False
    uses_rank: bool = False
    takes_progress: bool = False

    @property
    def debiased(self) -> bool:
        """Whether the method targets P through the scores (and so needs S)."""
        return self.debias != "none"


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
#: (docs/experiments/lskt_tau.py) at n = 2^12 and 2^13, "ksd" took 2.5-5x the time of "fixed"
#: for no lower KSD.
STOP_AUTO_FIXED_MAX_N = 2**13
_STOP = Option(
    "auto",
    "AMD stopping rule: 'ksd' (watch a resampled KSD of the true kernel every 32 steps, keep the "
    "best iterate, stop when it no longer improves; steps is the cap), 'fixed' (exactly steps "
    "per round, App. I.2) or 'auto' (default: 'fixed' for n <= 2^13, where watching costs more "
    "than it saves, else 'ksd')",
    lambda v, name: val.check_choice(v, name, (*STOP_RULES, "auto")),
)
#: Default ``tau`` (rank = ceil(n^tau)) of Low-rank Debiasing in lskt / lsr / lsc: the paper's
#: 0.4. Measured (docs/experiments/lskt_tau.py --n 15 16 --pairs skt:lskt sr:lsr sc:lsc
#: --taus 0.4, 3 seeds, m = sqrt(n), medians of the per-seed ratios): at n = 2^15 lskt / lsr /
#: lsc take 0.31 / 0.53 / 0.60 of the time of skt / sr / sc at a KSD 1.00 / 0.98 / 0.99 times
#: theirs; at 2^16 0.29 / 0.54 / 0.64 of the time at 1.00 / 1.02 / 1.12 times the KSD.
LD_DEFAULT_TAU = 0.4
_LD_OPTIONS = MappingProxyType({"rounds": _ROUNDS, "steps": _STEPS, "stop": _STOP})

#: Method name -> its row. Order: the debiased methods, then the unbiased baselines (the order of
#: the API reference's method table, docs/api/methods.md, which is generated from this one).
METHODS: Mapping[str, Method] = MappingProxyType(
    {
        "st": Method(
            summary="Stein thinning, greedy (Alg. D.1)",
            debias="st", thin="none", kind="equal", target="stein",
            run=lambda p, size, rng, progress=False: stein_thinning_coreset(
                p.K, size, progress=progress
            ),
            takes_progress=True,
        ),
        "skt": Method(
            summary="Stein kernel thinning: ST then KT targeting P (Alg. 1)",
            debias="st", thin="kt", kind="equal", target="stein",
            run=_on_matrix(stein_kernel_thinning),
            options=MappingProxyType(
                {"delta": _DELTA, "standard_thin": _STANDARD_THIN, "swap_passes": _SWAP_PASSES_P,
                 "swap_order": _SWAP_ORDER, "delta_rule": _DELTA_RULE}
            ),
            takes_progress=True,
        ),
        "lskt": Method(
            summary="low-rank SKT: LD, Resample, KT-Compress++ targeting P (Alg. 3)",
            debias="ld", thin="compresspp", kind="equal", target="stein",
            run=_on_matrix(low_rank_stein_kernel_thinning),
            options=MappingProxyType(
                {**_LD_OPTIONS, "g": _G, "delta": _DELTA, "standard_thin": _STANDARD_THIN,
                 "swap_passes": _SWAP_PASSES_P, "swap_order": _SWAP_ORDER,
                 "delta_rule": _DELTA_RULE}
            ),
            uses_rank=True, takes_progress=True,
        ),
        "sr": Method(
            summary="Stein Thinning, then Recombination Thinning (Alg. 5)",
            debias="st", thin="rt", kind="simplex", target="stein",
            run=_run_weighted("st", "rt"),
            uses_rank=True, takes_progress=True,
        ),
        "lsr": Method(
            summary="Low-rank Debiasing, then Recombination Thinning (Alg. 5)",
            debias="ld", thin="rt", kind="simplex", target="stein",
            run=_run_weighted("ld", "rt"), options=_LD_OPTIONS,
            uses_rank=True, takes_progress=True,
        ),
        "sc": Method(
            summary="Stein Thinning, then Cholesky Thinning (Alg. 7)",
            debias="st", thin="ct", kind="constant", target="stein",
            run=_run_weighted("st", "ct"),
            uses_rank=True, takes_progress=True,
        ),
        "lsc": Method(
            summary="Low-rank Debiasing, then Cholesky Thinning (Alg. 7)",
            debias="ld", thin="ct", kind="constant", target="stein",
            run=_run_weighted("ld", "ct"), options=_LD_OPTIONS,
            uses_rank=True, takes_progress=True,
        ),
        "standard": Method(
            summary="keep every n/size-th point",
            debias="none", thin="standard", kind="equal", target="none",
            run=_run_standard,
        ),
        "iid": Method(
            summary="uniform subsample without replacement",
            debias="none", thin="iid", kind="equal", target="none",
            run=_run_iid,
        ),
        "kt": Method(
            summary="kernel thinning of the input (Alg. D.2, centred kernel)",
            debias="none", thin="kt", kind="equal", target="centred",
            run=_on_matrix(kernel_thinning_coreset),
            options=MappingProxyType(
                {"delta": _DELTA, "swap_passes": _SWAP_PASSES, "swap_order": _SWAP_ORDER,
                 "delta_rule": _DELTA_RULE}
            ),
            takes_progress=True,
        ),
        "compresspp": Method(
            summary="KT-Compress++ of the input (Shetty et al.; Alg. F.3)",
            debias="none", thin="compresspp", kind="equal", target="base",
            run=_run_compresspp,
            options=MappingProxyType(
                {"g": _G, "delta": _DELTA, "standard_thin": _STANDARD_THIN,
                 "swap_target": _SWAP_TARGET}
            ),
            takes_progress=True,
        ),
        "rt": Method(
            summary="Recombination Thinning of the input (Alg. 4)",
            debias="none", thin="rt", kind="simplex", target="centred",
            run=_run_weighted("none", "rt"),
            takes_weights=True, uses_rank=True,
        ),
        "ct": Method(
            summary="Cholesky Thinning of the input (Alg. 6)",
            debias="none", thin="ct", kind="constant", target="centred",
            run=_run_weighted("none", "ct"),
            takes_weights=True, uses_rank=True,
        ),
    }
)

#: Methods whose ``rank`` (LD rank, or RT/CT test-vector count) ``rank`` / ``tau`` set.
RANKED_METHODS = tuple(name for name, m in METHODS.items() if m.uses_rank)

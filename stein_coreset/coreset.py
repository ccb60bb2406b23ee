"""The result of :func:`stein_coreset.compress`: a weighted subset of the input points
(:class:`Coreset`), with its support view, its sample view and what the run did."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _array_api as aa
from . import _validation as val
from .algorithms.resample import resample

__all__ = ["Coreset", "equal_draw_counts"]


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
    Coreset(method='sr', kind='simplex', size=16, ksd=0.06032)
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
        """One line on what the run did: the result, then each stage's KSD and size (distinct
        points) in order, which coreset won where coresets of the same number of picks were
        compared (``info["stages"]``), and the input diagnostics' suspect if any."""
        k = "n/a (no scores)" if self.ksd is None else f"{self.ksd:.4g}"
        line = f"{self.method}: {len(self)} points ({self.kind} weights), KSD {k}"
        stages = self.info.get("stages")
        if stages:
            parts = []
            for name, st in stages.items():
                if name == "winner":
                    continue
                v = st.get("ksd")
                size = f" ({st['size']} points)" if st.get("size") is not None else ""
                parts.append(f"{name} {'n/a' if v is None else f'{v:.3g}'}{size}")
            line += f"; stages: {', '.join(parts)}"
            if "winner" in stages:
                picks = stages.get("kt_swap", {}).get("picks")
                line += (f"; of the coresets of {picks} picks compared after KT-Swap, "
                         f"{stages['winner']} won")
        suspect = (self.info.get("diagnostics") or {}).get("suspect")
        if suspect:
            line += f"; WARNING: the scores look {suspect} (info['diagnostics'])"
        return line

    def __repr__(self):
        k = "None" if self.ksd is None else f"{self.ksd:.4g}"
        extra = "" if self.draws is None else f", draws={int(self.draws.shape[0])}"
        stages = self.info.get("stages")
        if stages and "winner" in stages:
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

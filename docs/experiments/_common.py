"""Shared code of the experiment scripts: method configurations, the sweep over input sizes n0
(standard thinning first, as in the paper's Sec. 5), median over seeds, optimal reweighting of
the baselines, the figure, and a small cache of simulated chains.

Every script imports the *installed* ``stein_coreset`` and skips (with a note) any method that the
build does not implement yet.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, "_cache")

# import the installed package, not the source tree two levels up
_root = os.path.dirname(os.path.dirname(HERE))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _root]

import stein_coreset as sc  # noqa: E402


@dataclass(frozen=True)
class Config:
    """One line of a figure: a method, how its size and rank follow n0, and its panel."""

    label: str
    method: str
    panel: str  # "equal" | "simplex" | "constant"
    tau: float = 0.5  # m = r = n0^tau for the low-rank / weighted methods
    equal_size: bool = False  # m = sqrt(n0) (the equal-weighted methods), r = n0^tau
    oracle: bool = False  # discard the oracle burn-in first (unbiased baselines)
    reweight: bool = False  # optimally reweight the coreset for its panel (baselines)
    low_rank: bool = False  # pass rank = n0^tau

    def size(self, n0: int) -> int:
        return int(round(math.sqrt(n0))) if self.equal_size else int(round(n0**self.tau))

    def rank(self, n0: int):
        return int(round(n0**self.tau)) if self.low_rank else None


def equal_configs(oracle=True):
    out = [
        Config("Standard thinning", "standard", "equal", equal_size=True),
        Config("Stein thinning", "st", "equal", equal_size=True),
        Config("Stein kernel thinning", "skt", "equal", equal_size=True),
        Config("Low-rank SKT (τ=0.4)", "lskt", "equal", 0.4, equal_size=True, low_rank=True),
        Config("Low-rank SKT (τ=0.5)", "lskt", "equal", 0.5, equal_size=True, low_rank=True),
    ]
    if oracle:
        out += [
            Config("Burn-in oracle + KT", "kt", "equal", equal_size=True, oracle=True),
            Config(
                "Burn-in oracle + Compress++", "compresspp", "equal", equal_size=True, oracle=True
            ),
        ]
    return out


def simplex_configs(oracle=True):
    out = [
        Config("Standard thinning (reweighted)", "standard", "simplex", reweight=True),
        Config("Stein thinning (reweighted)", "st", "simplex", reweight=True),
        Config("Stein recombination (τ=0.5)", "sr", "simplex", 0.5),
        Config("Low-rank SR (τ=0.4)", "lsr", "simplex", 0.4, low_rank=True),
        Config("Low-rank SR (τ=0.5)", "lsr", "simplex", 0.5, low_rank=True),
    ]
    if oracle:
        out += [Config("Burn-in oracle + RT", "rt", "simplex", 0.5, oracle=True)]
    return out


def constant_configs(oracle=True):
    out = [
        Config("Standard thinning (reweighted)", "standard", "constant", reweight=True),
        Config("Stein thinning (reweighted)", "st", "constant", reweight=True),
        Config("Stein Cholesky (τ=0.5)", "sc", "constant", 0.5),
        Config("Low-rank SC (τ=0.4)", "lsc", "constant", 0.4, low_rank=True),
        Config("Low-rank SC (τ=0.5)", "lsc", "constant", 0.5, low_rank=True),
    ]
    if oracle:
        out += [Config("Burn-in oracle + CT", "ct", "constant", 0.5, oracle=True)]
    return out


# ---------------------------------------------------------------------------------------------


def standard_thin(n: int, n0: int) -> np.ndarray:
    """Standard thinning from n to n0 points: the last index of each of n0 equal blocks."""
    idx = np.floor(np.arange(n0) * (n / n0)).astype(np.int64) + (n // n0) - 1
    return np.clip(idx, 0, n - 1)


def optimal_weights(K: np.ndarray, kind: str) -> np.ndarray:
    """argmin w^T K w over the simplex ("simplex") or over sum w = 1 ("constant")."""
    m = K.shape[0]
    if kind == "constant":
        ones = np.ones(m)
        v = np.linalg.lstsq(K + 1e-10 * np.trace(K) / m * np.eye(m), ones, rcond=None)[0]
        return v / v.sum()
    from scipy.optimize import minimize

    res = minimize(
        lambda w: w @ K @ w,
        np.full(m, 1.0 / m),
        jac=lambda w: 2 * K @ w,
        bounds=[(0.0, 1.0)] * m,
        constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0, "jac": lambda w: np.ones(m)}],
        method="SLSQP",
        options={"maxiter": 500, "ftol": 1e-14},
    )
    w = np.clip(res.x, 0, None)
    return w / w.sum()


def run_one(cfg: Config, X, S, n0, seed, kernel, reference, burn_in=0):
    """(m, KSD, energy distance, seconds) of one configuration at input size n0."""
    start = burn_in if cfg.oracle else 0
    idx = start + standard_thin(X.shape[0] - start, n0)
    Xn, Sn = X[idx], S[idx]
    m = min(cfg.size(n0), n0)
    t0 = time.perf_counter()
    res = sc.compress(
        Xn, Sn, size=m, method=cfg.method, kernel=kernel, rank=cfg.rank(n0), seed=seed
    )
    dt = time.perf_counter() - t0
    local = np.asarray(res.indices)
    P, SP, w = Xn[local], Sn[local], np.asarray(res.weights)
    if cfg.reweight and cfg.panel in ("simplex", "constant"):
        w = optimal_weights(np.asarray(kernel.matrix(P, SP)), cfg.panel)
    ksd = sc.ksd(P, SP, weights=w, kernel=kernel)
    ed = sc.energy_distance(P, reference, wx=w)
    return len(local), ksd, ed, dt


def sweep(configs, X, S, n0s, seeds, kernel, reference, burn_in=0, log=print):
    """results["panel: label"] = {"method", "panel", "m", "ksd", "energy", ...} (lists) with
    medians over the seeds, one entry per n0; methods this build lacks are skipped."""
    available = set(sc.available_methods())
    results = {}
    for cfg in configs:
        if cfg.method not in available:
            log(f"  skip {cfg.label}: method {cfg.method!r} is not implemented in this build")
            continue
        row = {
            "method": cfg.method,
            "panel": cfg.panel,
            "n0": [],
            "m": [],
            "ksd": [],
            "energy": [],
            "time": [],
        }
        for n0 in n0s:
            runs = [run_one(cfg, X, S, n0, s, kernel, reference, burn_in) for s in seeds]
            ms, ks, es, ts = zip(*runs, strict=True)
            row["n0"].append(int(n0))
            row["m"].append(int(np.median(ms)))
            row["ksd"].append(float(np.median(ks)))
            row["energy"].append(float(np.median(es)))
            row["time"].append(float(np.median(ts)))
            log(
                f"  {cfg.label:<34} n0={n0:<6} m={row['m'][-1]:<4} KSD={row['ksd'][-1]:<10.4g} "
                f"energy={row['energy'][-1]:<10.4g} ({row['time'][-1]:.2f} s)"
            )
        results[f"{cfg.panel}: {cfg.label}"] = row
    return results


PANEL_TITLES = {
    "equal": "Equal-weighted",
    "simplex": "Simplex-weighted",
    "constant": "Constant-preserving",
}


def figure(results, suptitle, metric_labels=("KSD (MMD to P)", "Energy distance")):
    """The figure of a sweep's ``results`` (as saved in the JSON): KSD and energy distance
    against m, one column per panel (equal, simplex, constant-preserving weights)."""
    import matplotlib.pyplot as plt

    panels = [
        p
        for p in ("equal", "simplex", "constant")
        if any(r["panel"] == p for r in results.values())
    ]
    fig, axes = plt.subplots(2, len(panels), figsize=(4.6 * len(panels), 7.0), squeeze=False)
    for j, panel in enumerate(panels):
        for label, r in results.items():
            if r["panel"] != panel:
                continue
            style = "--" if "oracle" in label.lower() else "-"
            name = label.split(": ", 1)[1]
            for i, key in enumerate(("ksd", "energy")):
                axes[i, j].plot(r["m"], r[key], style, marker="o", ms=3, label=name)
        for i in range(2):
            ax = axes[i, j]
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("coreset size m")
            ax.set_ylabel(metric_labels[i])
            ax.grid(alpha=0.3, which="both")
        axes[0, j].set_title(PANEL_TITLES[panel])
        axes[0, j].legend(fontsize=7)
    fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    return fig


def plot(results, path, suptitle, metric_labels=("KSD (MMD to P)", "Energy distance")):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = figure(results, suptitle, metric_labels)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def load_json(name: str) -> dict:
    """``{"meta": ..., "results": ...}`` as a script saved it beside itself (NAME.json)."""
    with open(os.path.join(HERE, name + ".json")) as f:
        return json.load(f)


def _commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def save_json(results, path, meta):
    # the figure carries the commit it was measured at (the gallery prints it)
    meta = {**meta, "commit": meta.get("commit") or _commit()}
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)


def cached(name: str, make, refresh: bool = False):
    """``make()`` -> dict of arrays, cached as _cache/NAME.npz."""
    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, name + ".npz")
    if os.path.exists(path) and not refresh:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    data = make()
    np.savez(path, **data)
    return data

"""False alarms and detections of compress's input diagnostics on targets written here
(docs/diagnostics.md): the library's test beds and the curved, hierarchical, heavy-tailed,
multimodal and Gaussian targets of ``_diagnostic_targets.py`` (d = 1 to 100).

Correct scores of every sample (the test beds' chains; exact draws, a chain with its burn-in
kept, a tempered, a short and a thinned chain of each hand-written target), and four misuses of
each: X and S swapped, S sign-flipped, the rows of S shuffled or shifted by one; and two that
(X, S) cannot show (the hand-written targets): the scores of the target moved by one sd of X
("another target"), and eight schools' tau where its scores are in log tau ("constrained X").
Every (sample, misuse) runs through ``stein_coreset.compress`` with each method; a call counts
as flagged when ``res.info["diagnostics"]["suspect"]`` is set. Writes
``diagnostics_suite.json`` (one record per call, ``_diagnostic_runs.py``) and prints the
tables of docs/diagnostics.md.

    python docs/experiments/diagnostics.py [--seeds 3] [--n 4096] [--size 64]
    python docs/experiments/diagnostics.py --table          # the tables from the JSON
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import _diagnostic_runs as runs
import _diagnostic_targets as dt
import numpy as np
from _common import CACHE, HERE

from stein_coreset import datasets

OUT = os.path.join(HERE, "diagnostics_suite.json")


def _gaussian_chain(n, seed, mean=(1.0, -2.0, 0.5)):
    target = datasets.Gaussian(np.array(mean),
                               np.array([[1.0, 0.3, 0.0], [0.3, 2.0, 0.4], [0.0, 0.4, 0.5]]))
    rng = np.random.default_rng(seed)
    ch = datasets.mala(target.log_density_and_score, target.mean + 8.0 * rng.standard_normal(3),
                       n, 0.05, rng=rng)
    return ch.X, ch.S, (target.mean, np.sqrt(np.diag(target.cov)))


def _gaussian4(n, seed, T):
    target = datasets.Gaussian.correlated(d=4, rho=0.8)
    X = target.temper(T).sample(n, seed)
    return X, target.score(X), (target.mean, np.sqrt(np.diag(target.cov)))


def _gmm(n, seed):
    ch = datasets.gmm_chain(n, seed=seed)
    ref = datasets.GaussianMixture().sample(100_000, 0)
    return ch.X, ch.S, (ref.mean(0), ref.std(0))


def _logistic_sgld(n, seed):
    target = datasets.LogisticRegression(seed=seed)
    mode, _ = target.mode()
    X = datasets.sgld(target, mode + 0.5, n, 2e-3, rng=seed)
    return X, target.score(X), None


def _goodwin(n, seed):
    ch = datasets.goodwin_chain(n, seed=seed)
    return ch.X, ch.S, None


#: The library's test beds (the earlier version of this study).
TEST_BEDS = {
    "Gaussian MALA, burn-in (d=3)": _gaussian_chain,
    "centred Gaussian MALA, burn-in (d=3)": lambda n, s: _gaussian_chain(n, s, (0.0, 0.0, 0.0)),
    "Gaussian exact draws (d=4)": lambda n, s: _gaussian4(n, s, 1.0),
    "Gaussian tempered T=4 (d=4)": lambda n, s: _gaussian4(n, s, 4.0),
    "mixture MALA, burn-in (d=2)": _gmm,
    "logistic SGLD (d=4)": _logistic_sgld,
    "Goodwin MALA, burn-in (d=4)": _goodwin,
}


def _undetectable(target) -> dict:
    """Misuses (X, S) alone cannot show (docs/diagnostics.md, "What cannot be detected")."""
    out = {"another target": lambda X, S, rng: (X, target.score(X - X.std(axis=0)))}
    if isinstance(target, dt.EightSchoolsCentred):  # tau where log tau belongs
        out["constrained X"] = lambda X, S, rng: (np.column_stack([X[:, :9], np.exp(X[:, 9])]),
                                                  S)
    return out


def samples(n: int):
    """(name, kind, make(seed) -> (X, S, truth), extra misuses) of every sample."""
    for name, make in TEST_BEDS.items():
        yield name, "test bed", (lambda seed, make=make: make(n, seed)), {}
    for name, target in dt.TARGETS.items():
        ref = target.sample(100_000, np.random.default_rng(99))
        truth = (ref.mean(0), ref.std(0))
        for kind in dt.SAMPLES:
            yield name, kind, (lambda seed, t=target, k=kind, tr=truth:
                               (*dt.make(t, k, n, seed), tr)), _undetectable(target)


def cached(name: str, kind: str, seed: int, n: int, make):
    path = os.path.join(CACHE, "diagnostics",
                        f"{name}_{kind}_{seed}_{n}.npz".replace(" ", "_").replace("/", "_"))
    if os.path.exists(path):
        z = np.load(path)
        truth = (z["tm"], z["ts"]) if "tm" in z else None
        return z["X"], z["S"], truth
    X, S, truth = make(seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    extra = {} if truth is None else {"tm": truth[0], "ts": truth[1]}
    np.savez(path, X=X, S=S, **extra)
    return X, S, truth


def tables(data: dict) -> list:
    recs = data["records"]
    m = data["meta"]
    lines = [f"`{m['command']}`, commit {m['commit']}, {m['machine']}; methods "
             f"{', '.join(m['methods'])}, n = {m['n']}, size {m['size']}, seeds "
             f"0-{m['seeds'] - 1}; a cell is flagged calls / calls (the suspect named).", ""]
    beds = [r for r in recs if r["kind"] == "test bed"]
    own = [r for r in recs if r["kind"] != "test bed"]
    lines += runs.summary_lines("test beds", beds) + runs.summary_lines("targets", own)
    lines += ["", "#### Test beds", ""]
    lines += runs.detection_table(beds, lambda r: r["target"], rows=list(TEST_BEDS))
    lines += ["", "#### Targets, by sample", ""]
    lines += runs.detection_table(own, lambda r: r["kind"], rows=list(dt.SAMPLES))
    lines += ["", "#### Targets, by target", ""]
    lines += runs.detection_table(own, lambda r: r["target"], rows=list(dt.TARGETS))
    lines += ["", "#### Misuses (X, S) cannot show, by sample", ""]
    lines += runs.detection_table(own, lambda r: r["kind"], rows=list(dt.SAMPLES),
                                  misuses=("another target", "constrained X"))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--methods", nargs="+", default=["st", "skt", "sr"])
    ap.add_argument("--only", default=None, help="run the samples whose name contains this")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--table", action="store_true", help="print the tables of --out and stop")
    args = ap.parse_args(argv)
    if args.table:
        print("\n".join(tables(runs.load(args.out))))
        return
    t0 = time.perf_counter()
    records = []
    for name, kind, make, extra in samples(args.n):
        if args.only and args.only not in name:
            continue
        t1 = time.perf_counter()
        for seed in range(args.seeds):
            X, S, truth = cached(name, kind, seed, args.n, make)
            records += runs.run_sample(X, S, {"target": name, "kind": kind, "seed": seed},
                                       methods=args.methods, size=args.size, seed=seed,
                                       truth=truth, misuses={**runs.MISUSES, **extra})
        mine = [r for r in records if r["target"] == name and r["kind"] == kind]
        print(f"{name} / {kind}: " + " ".join(
            f"{m} {runs.cell([r for r in mine if r['misuse'] == m])}"
            for m in {**runs.MISUSES, **extra})
            + f" ({time.perf_counter() - t1:.0f} s)", flush=True)
    meta = runs.meta("python docs/experiments/diagnostics.py " + " ".join(sys.argv[1:]))
    meta.update({"methods": args.methods, "n": args.n, "size": args.size, "seeds": args.seeds,
                 "seconds": round(time.perf_counter() - t0)})
    runs.save(args.out, meta, records)
    print("\n".join(tables(runs.load(args.out))))


if __name__ == "__main__":
    main()

"""Shared code of the diagnostics studies (diagnostics.py, diagnostics_posteriordb.py): the
misuses, one compress call per (sample, misuse, method) with its figures, and the tables.

A record is one ``compress`` call: the sample's labels, the misuse, the method, the suspect
named (None: no warning), the figures of ``res.info["diagnostics"]`` (``in_*``: the input's
Stein residuals, ``nn_*``: the nearest-neighbour test, ``co_*``: the result's residuals), and
for correct scores ``err``: the result's worst weighted-mean error over the coordinates, in the
reference's sds (exact draws, or posteriordb's reference), which says whether a warning about
the result was true.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import warnings

import numpy as np

import stein_coreset as sc

MISUSES = {
    "correct": lambda X, S, rng: (X, S),
    "swapped": lambda X, S, rng: (S, X),
    "sign-flipped": lambda X, S, rng: (X, -S),
    "shuffled": lambda X, S, rng: (X, S[rng.permutation(len(S))]),
    "shifted by one": lambda X, S, rng: (X, np.roll(S, 1, axis=0)),
}
#: A correct-score warning is counted as true when the result is this many reference sds off
#: on some coordinate: the sample did not cover P, and the warning says so.
OFF = 1.0


def _r(x):
    return None if x is None else float(f"{x:.4g}") if math.isfinite(x) else x


def run_sample(X, S, labels: dict, *, methods, size: int, seed: int, truth=None,
               misuses=MISUSES) -> list:
    """One record per (misuse, method) of the sample (X, S) with its correct scores S.
    ``truth``: (mean, sd) per coordinate of P, to score the correct-score results."""
    ok = np.isfinite(X).all(axis=1) & np.isfinite(S).all(axis=1)
    X, S = X[ok], S[ok]
    out = []
    for mname, misuse in misuses.items():
        Xm, Sm = misuse(X, S, np.random.default_rng(1000 + seed))
        for method in methods:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    res = sc.compress(Xm, Sm, size, method, seed=seed)
                except ValueError as exc:  # e.g. all points equal: nothing to compress
                    out.append({**labels, "misuse": mname, "method": method,
                                "error": str(exc)[:80]})
                    continue
            dg = res.info["diagnostics"]
            rec = {**labels, "misuse": mname, "method": method, "suspect": dg["suspect"],
                   "n": int(X.shape[0]), "d": int(X.shape[1]), "k": len(res),
                   "ksd": _r(res.ksd)}
            rec.update({f"in_{k}": _r(v) for k, v in dg["input"].items()})
            rec.update({k: _r(v) if isinstance(v, float) else v
                        for k, v in dg.get("field", {}).items()})  # (none before 0.2)
            if dg["coreset"] is not None:
                rec.update({f"co_{k}": _r(v) for k, v in dg["coreset"].items()})
            if mname == "correct" and truth is not None:
                idx = np.asarray(res.indices)
                mean = np.asarray(res.weights) @ X[idx]
                rec["err"] = _r(float(np.max(np.abs(mean - truth[0]) / truth[1])))
            out.append(rec)
    return out


def meta(command: str) -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {"command": command, "commit": commit, "stein_coreset": sc.__version__,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores"}


def save(path: str, meta_: dict, records: list) -> None:
    with open(path, "w") as f:
        f.write('{"meta": ' + json.dumps(meta_) + ',\n"records": [\n')
        f.write(",\n".join(json.dumps(r, separators=(",", ":")) for r in records))
        f.write("\n]}\n")


def load(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def cell(recs: list) -> str:
    recs = [r for r in recs if "error" not in r]
    if not recs:
        return "—"
    named: dict = {}
    for r in recs:
        if r["suspect"] is not None:
            named[r["suspect"]] = named.get(r["suspect"], 0) + 1
    hits = sum(named.values())
    what = ", ".join(f"{k} {v}" for k, v in sorted(named.items()))
    return f"{hits}/{len(recs)}" + (f" ({what})" if what else "")


def detection_table(records: list, row_key, rows=None, misuses=tuple(MISUSES)) -> list:
    """Markdown lines: one row per ``row_key(record)``, one column per misuse; a cell is
    flagged calls / calls, with the suspects named."""
    keys = rows or sorted({row_key(r) for r in records})
    lines = ["| sample | " + " | ".join(misuses) + " |", "|---" * (len(misuses) + 1) + "|"]
    for key in keys:
        mine = [r for r in records if row_key(r) == key]
        lines.append(f"| {key} | " + " | ".join(
            cell([r for r in mine if r["misuse"] == m]) for m in misuses) + " |")
    return lines


def summary(records: list) -> dict:
    """Counts: calls and warnings on correct scores (those whose result is >= OFF reference
    sds off apart), and the detection of each misuse."""
    ok = [r for r in records if "error" not in r]
    correct = [r for r in ok if r["misuse"] == "correct"]
    warned = [r for r in correct if r["suspect"] is not None]
    off = [r for r in warned if r.get("err") is not None and r["err"] >= OFF]
    out = {"correct_calls": len(correct), "correct_warned": len(warned),
           "correct_warned_result_off": len(off),
           "correct_by_suspect": {}, "detection": {}}
    for r in warned:
        out["correct_by_suspect"][r["suspect"]] = out["correct_by_suspect"].get(
            r["suspect"], 0) + 1
    for m in MISUSES:
        if m == "correct":
            continue
        mine = [r for r in ok if r["misuse"] == m]
        out["detection"][m] = (sum(r["suspect"] is not None for r in mine), len(mine))
    return out


def summary_lines(name: str, records: list) -> list:
    s = summary(records)
    det = ", ".join(f"{m} {a}/{b} ({a / max(b, 1):.1%})" for m, (a, b) in s["detection"].items())
    by = ", ".join(f"{k} {v}" for k, v in sorted(s["correct_by_suspect"].items())) or "none"
    return [f"- **{name}**: correct scores warned in {s['correct_warned']} of "
            f"{s['correct_calls']} calls ({by}; of them {s['correct_warned_result_off']} where "
            f"the result is >= {OFF:g} reference sd off, i.e. the sample did not cover P); "
            f"detected: {det}."]

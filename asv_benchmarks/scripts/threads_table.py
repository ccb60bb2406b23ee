"""Speed-up table: every method at 1, 2, 8, 16 threads, ratios to one thread.

    python asv_benchmarks/scripts/threads_table.py --json table.json  # n = 2^12, 2^14, 2^16; 240 s
    python asv_benchmarks/scripts/threads_table.py --budget-s 900 --threads 1,2,4,8,16  # more cells
    python asv_benchmarks/scripts/threads_table.py --n 14,15,16 --st-frac 0.25
    python asv_benchmarks/scripts/threads_table.py --probe-only  # the team's own costs
    # where the time goes:
    python asv_benchmarks/scripts/threads_table.py --n 16 --methods st --profile skt,lskt

Thread counts above the usable cores are dropped (the first line says so): a table of more
threads than cores measures the scheduler, not the library. ``--probe-only`` prints what a
step's barrier and a loop's wake-up cost on this machine (parallel.hpp's kBarrierNs and kWakeNs
are the model's guesses of them) and nothing else. ``--profile m1,m2`` then runs those methods
once more at the largest n with the team's region accounting on (``_core._team_stats``): by
call site, each region's wall time, its members' busy share of members x wall (the rest waited
at step barriers or for a wake-up) and its serial combine time, and the time outside every
region; ``outside + combine`` of a 1-thread run bounds the speed-up at 16 threads (Amdahl).

Cells are (method, n, threads): the wall time of one ``compress(..., n_threads=k)`` call on
d = 4, X = 0.7 + 1.5 z, S = -X, the Stein IMQ kernel with sigma^2 = 8 (kt: the IMQ base kernel
centred at X), size = ceil(sqrt(n)); lskt, lsr, lsc with tau = 0.4 and size = ceil(n^0.4).
``st`` is Stein thinning run for n steps (SKT/SR/SC's first stage; ``--st-frac f`` runs f n steps,
the cost of a step being the same at every step, so the ratios stand). ``dksd`` is the
estimators' DKSD pass (value and gradient, diagonal diffusion) on the first n / 4 points (it
costs O(n^2 d) per pass). A cell is one run (best of up to five when it takes under
``--short-s``). Every cell also checks that the selection equals the one-thread
selection (``same``).

Order: the most important cells first (the largest n: st, skt, sr, sc, lskt at 1, 8 and 16
threads; then the smaller n, cheaper, every method at every thread count; then lsr, lsc, kt,
dksd at the largest n; then the other thread counts there), so a ``--budget-s`` that runs out
drops the least important ones. A cell is skipped when the time
spent is past the budget, or when its predicted time (from a measured cell of the same method
and n, assuming linear scaling) would pass it. The table and the JSON (rewritten after every
cell, so a killed run leaves what it had) give the load average, the cores and the CPU model,
and the usable CPUs' layout (``topology``: physical cores, hardware threads a core, L3 domains,
NUMA nodes): k threads can reach k x only on k physical cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import sys
import time

import numpy as np

MAIN = ("st", "skt", "sr", "sc", "lskt")
OTHER = ("lsr", "lsc", "kt", "dksd")
LOWRANK = ("lskt", "lsr", "lsc")


def biased_chain(n, d, seed):
    """A biased sample for the target N(0, I_d): shifted, over-dispersed Gaussian points (the
    input of asv_benchmarks/scripts/compare_peers.py)."""
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return X, -X


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def topology() -> dict:
    """The usable CPUs' layout from Linux's sysfs: physical cores (SMT siblings counted once),
    the most hardware threads of one core among them, last-level cache domains (and their
    size) and NUMA nodes. A speed-up bar of k x on k CPUs assumes k physical cores; SMT siblings
    share one core's floating-point units, and a barrier across L3 domains costs more than one
    inside. Unknown fields (no sysfs) are None."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = list(range(os.cpu_count() or 1))
    base = "/sys/devices/system/cpu"

    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return None

    cores, l3, nodes = set(), set(), set()  # a core: its hardware threads' CPU list
    l3_size = None
    for c in cpus:
        sib = read(f"{base}/cpu{c}/topology/thread_siblings_list")
        if sib is None:
            return {"cpus": len(cpus), "physical_cores": None, "smt": None, "l3_domains": None,
                    "l3_size": None, "numa_nodes": None}
        cores.add(sib)
        for idx in range(8):
            if read(f"{base}/cpu{c}/cache/index{idx}/level") == "3":
                l3.add(read(f"{base}/cpu{c}/cache/index{idx}/shared_cpu_list"))
                l3_size = read(f"{base}/cpu{c}/cache/index{idx}/size")
        try:
            nodes.update(e for e in os.listdir(f"{base}/cpu{c}") if re.fullmatch(r"node\d+", e))
        except OSError:
            pass
    usable = set(cpus)
    smt = max(len(usable.intersection(_cpu_list(sib))) for sib in cores)
    return {"cpus": len(cpus), "physical_cores": len(cores), "smt": smt,
            "l3_domains": len(l3) or None, "l3_size": l3_size, "numa_nodes": len(nodes) or None}


def _cpu_list(text: str) -> list[int]:
    """Linux's CPU list syntax ("0-3,8,10-11") as integers."""
    out = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out += range(int(a), int(b) + 1)
        elif part:
            out.append(int(part))
    return out


def describe_topology(t: dict) -> str:
    """:func:`topology` as one line for the table's header and device_run.sh's summary."""
    if t["physical_cores"] is None:
        return f"{t['cpus']} usable CPUs (layout unknown: no sysfs topology)"
    text = (f"{t['cpus']} usable CPUs on {t['physical_cores']} physical cores "
            f"({t['smt'] or 1} hardware thread(s) a core)")
    if t["l3_domains"]:
        text += f", {t['l3_domains']} L3 domain(s) of {t['l3_size']}"
    if t["numa_nodes"]:
        text += f", {t['numa_nodes']} NUMA node(s)"
    return text


def _digest(*arrays) -> str:
    h = hashlib.sha1()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a)).tobytes())
    return h.hexdigest()[:16]


def _cell(method: str, X, S, threads: int, st_frac: float):
    """(seconds, digest of the result) of one cell."""
    import stein_coreset as sc

    n = X.shape[0]
    sigma = math.sqrt(8.0)
    if method == "dksd":
        from stein_coreset.engine.cpu.bridge import dksd_pass

        m = max(2, n // 4)
        U = np.ascontiguousarray(X[:m])
        V = np.ascontiguousarray(S[:m])
        d = U.shape[1]
        F = np.ones(m * d)
        base = np.full(d, sc.IMQ().code, dtype=np.intc)
        t0 = time.perf_counter()
        total, Gv, Gf = dksd_pass(U, V, F, False, base, np.full(d, sigma), np.full(d, -0.5),
                                  np.ones(d), True, threads)
        dt = time.perf_counter() - t0
        return dt, _digest(np.asarray([total]), Gv, Gf)
    if method == "kt":
        kernel = sc.IMQ(sigma=sigma)
    else:
        kernel = sc.SteinKernel(sc.IMQ(sigma=sigma))
    kw = {}
    if method in LOWRANK:
        kw["tau"] = 0.4
        size = math.ceil(n**0.4 - 1e-9)
    elif method == "st":
        size = max(1, round(st_frac * n))
    else:
        size = math.ceil(math.sqrt(n))
    t0 = time.perf_counter()
    r = sc.compress(X, S, size=size, method=method, kernel=kernel, seed=0, n_threads=threads,
                    **kw)
    dt = time.perf_counter() - t0
    return dt, _digest(r.indices, r.weights)


def site_label(entry: dict) -> str:
    """A region's call site, from its body's demangled type: the C++ function that opened it,
    then "loop" (a for_chunks loop) or "steps" (a region of dependent steps) and the lambda's
    ordinal there."""
    name = entry["site"].replace("(anonymous namespace)::", "")
    func = re.split(r"[(<]", name, maxsplit=1)[0].removeprefix("sc::")
    kind = "loop" if entry.get("loop") else "steps"
    tail = re.findall(r"\{lambda\([^)]*\)#(\d+)\}", name)
    return f"{func} {kind}#{tail[-1]}" if tail else f"{func} {kind}"


def profile(cells, inputs, st_frac: float, out: dict) -> None:
    """Where each cell's time goes: the accounting of every team region (_core._team_stats) by
    call site — its wall time, its members' busy share of members x wall (the rest waited at the
    step barriers or for a wake-up), its last arrivers' serial combine time — and the time
    outside every region (Python, NumPy and serial C++). ``outside + combine`` runs on one
    thread at any team size: Amdahl's bound on the speed-up at M threads is
    1 / (f + (1 - f) / M) with f its share of a 1-thread run."""
    from stein_coreset.engine.cpu import _core

    rows = out.setdefault("profile", [])
    for method, n, t in cells:
        _core._team_stats(True)
        dt, _ = _cell(method, *inputs[n], t, st_frac)
        sites = _core._team_stats(False)
        top = [e for e in sites if not e["nested"]]
        inside = sum(e["wall_s"] for e in top)
        combine = sum(e["combine_s"] for e in top)
        outside = max(0.0, dt - inside)
        f = min(1.0, (outside + combine) / dt) if dt > 0 else 0.0
        row = {"method": method, "n": n, "threads": t, "seconds": dt, "outside_s": outside,
               "combine_s": combine, "serial_share": f,
               "amdahl_16": 1.0 / (f + (1.0 - f) / 16.0), "sites": []}
        print(f"\nprofile: {method} n=2^{n.bit_length() - 1} t={t}: {dt:.3f} s, outside the "
              f"regions {outside:.3f} s, serial combines {combine:.3f} s: serial share "
              f"{f:.1%}" + (f" (Amdahl's bound at 16 threads x{row['amdahl_16']:.1f})"
                            if t == 1 else ""), flush=True)
        print(f"  {'site':34s} {'regions':>7s} {'steps':>8s} {'members':>7s} {'wall s':>8s} "
              f"{'busy':>5s} {'combine s':>9s}")
        merged = {}  # sites of one label (template instances of one function) added up
        for e in sites:
            label = site_label(e) + (" (nested)" if e["nested"] else "")
            m = merged.setdefault((label, e["members"]), dict(
                label=label, members=e["members"], team=e["team"], nested=e["nested"],
                regions=0, steps=0, chunks=0, wall_s=0.0, busy_s=0.0, combine_s=0.0))
            for k in ("regions", "steps", "chunks", "wall_s", "busy_s", "combine_s"):
                m[k] += e[k]
        for m in sorted(merged.values(), key=lambda m: -m["wall_s"]):
            m["busy_share"] = m["busy_s"] / (m["members"] * m["wall_s"]) if m["wall_s"] else 1.0
            row["sites"].append(m)
            if m["wall_s"] >= 0.005 * dt:
                print(f"  {m['label'][:34]:34s} {m['regions']:7d} {m['steps']:8d} "
                      f"{m['members']:7d} {m['wall_s']:8.3f} {m['busy_share']:5.0%} "
                      f"{m['combine_s']:9.4f}")
        rows.append(row)


def probe(cores: int, out: dict | None = None) -> None:
    """Print (and record in ``out``) the team's own costs on this machine: a step's barrier on
    M awake members (wall ns beyond the work split M ways, median of 5) and the wake-up of a
    one-off loop on M members whose workers were asleep."""
    from stein_coreset.engine.cpu import _core

    ms = sorted({m for m in (2, 4, 8, 16, cores) if 2 <= m <= cores})
    rows = []
    for m in ms:
        step = sorted(_core._team_probe_step_ns(m, 20000) for _ in range(5))[2]
        wake = sorted(_core._team_probe_wake_ns(m, 20) for _ in range(3))[1]
        rows.append({"members": m, "step_barrier_ns": step, "loop_wake_ns": wake})
        print(f"  team of {m:2d}: a step's barrier {step:8.0f} ns ({step / m:6.0f} ns a member; "
              f"model 400), a loop's wake-up {wake / 1e3:7.1f} us (model 75); load "
              f"{os.getloadavg()[0]:.2f}", flush=True)
    if not ms:
        print("  one usable core: no team to probe", flush=True)
    if out is not None:
        out["probes"] = rows


def _order(ns, threads, methods):
    """Cells, most important first."""
    big = max(ns)
    first = [t for t in (1, 8, 16) if t in threads]
    rest = [t for t in threads if t not in first]
    cells = []
    for t in first:
        cells += [(m, big, t) for m in MAIN if m in methods]
    for n in sorted(ns)[:-1]:  # the smaller n (cheaper): every thread count
        for t in first + rest:
            cells += [(m, n, t) for m in methods]
    for t in first:
        cells += [(m, big, t) for m in OTHER if m in methods]
    for t in rest:
        cells += [(m, big, t) for m in methods]
    return cells


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", default="12,14,16",
                   help="comma-separated log2(n) values (default 12,14,16)")
    p.add_argument("--threads", default="1,2,8,16",
                   help="comma-separated thread counts (default 1,2,8,16; capped by the cores)")
    p.add_argument("--methods", default=",".join(MAIN + OTHER),
                   help=f"comma-separated subset of {','.join(MAIN + OTHER)}")
    p.add_argument("--budget-s", type=float, default=240.0,
                   help="skip the remaining cells once this many seconds are spent (default "
                   "240; 0: no bound)")
    p.add_argument("--probe-only", action="store_true",
                   help="print the team's barrier and wake-up costs on this machine and stop")
    p.add_argument("--st-frac", type=float, default=1.0,
                   help="run st for this fraction of n steps (default 1: n steps)")
    p.add_argument("--short-s", type=float, default=0.5,
                   help="cells faster than this are repeated (best of up to 5 runs)")
    p.add_argument("--json", help="write the table to this JSON file (after every cell)")
    p.add_argument("--profile", default="",
                   help="comma-separated methods to profile after the table, at the largest n: "
                   "each team region's wall, busy and serial combine time by call site, and "
                   "the time outside them")
    p.add_argument("--profile-threads", default="",
                   help="comma-separated thread counts of the profiles (default: 1 and the "
                   "most of --threads)")
    args = p.parse_args(argv)

    import stein_coreset as sc
    from stein_coreset._threads import usable_cores

    if args.probe_only:
        print(describe_topology(topology()), flush=True)
        probe(usable_cores())
        return 0
    ns = [1 << int(a) for a in args.n.split(",")]
    asked = sorted({int(a) for a in args.threads.split(",")})
    threads = [t for t in asked if t <= usable_cores()] or [1]
    dropped = [t for t in asked if t not in threads]
    if args.budget_s <= 0:
        args.budget_s = math.inf
    methods = [m for m in args.methods.split(",") if m]
    bad = [m for m in methods if m not in MAIN + OTHER]
    if bad:
        p.error(f"unknown methods {bad}")
    out = {
        "cpu_count": os.cpu_count(), "usable_cores": usable_cores(), "cpu_model": _cpu_model(),
        "version": getattr(sc, "__version__", None), "loadavg_before": os.getloadavg(),
        "team_wait": os.environ.get("STEIN_CORESET_TEAM_WAIT") or "sleep",
        "team_grain": os.environ.get("STEIN_CORESET_TEAM_GRAIN") or "1",
        "team_barrier": os.environ.get("STEIN_CORESET_TEAM_BARRIER") or "flat",
        "st_frac": args.st_frac, "budget_s": args.budget_s, "topology": topology(),
        "cells": [],
    }
    print(f"{out['cpu_model']}: {out['cpu_count']} CPUs, {out['usable_cores']} usable; load "
          f"average {out['loadavg_before']}; n = {ns}, threads = {threads}; barrier "
          f"{out['team_barrier']}, wait {out['team_wait']}", flush=True)
    print(f"  {describe_topology(out['topology'])}", flush=True)
    if dropped:
        out["threads_dropped"] = dropped
        print(f"  threads {dropped} dropped: more than the {usable_cores()} usable cores (those "
              "cells need a machine with that many)", flush=True)
    probe(max(threads), out)

    def dump():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)

    # warm-up: imports, first-use setup, worker threads
    _cell("st", *biased_chain(512, 4, 0), 2, 1.0)
    inputs = {}
    times = {}  # (method, n, threads) -> seconds
    digests = {}
    start = time.perf_counter()
    for method, n, t in _order(ns, threads, methods):
        spent = time.perf_counter() - start
        known = [(k, v) for (m2, n2, k), v in times.items() if m2 == method and n2 == n]
        predicted = min((v * k / t for k, v in known), default=0.0)
        row = {"method": method, "n": n, "threads": t}
        if spent >= args.budget_s or spent + predicted > args.budget_s:
            row["skipped"] = f"budget: {spent:.0f} s spent, cell predicted {predicted:.0f} s"
            out["cells"].append(row)
            print(f"  {method:5s} n=2^{n.bit_length() - 1} t={t:2d}  skipped ({row['skipped']})",
                  flush=True)
            continue
        if n not in inputs:
            inputs[n] = biased_chain(n, 4, 0)
        dt, dig = _cell(method, *inputs[n], t, args.st_frac)
        runs, used = 1, dt
        while used < args.short_s and runs < 5:  # a short cell: best of a few runs
            dt2, _ = _cell(method, *inputs[n], t, args.st_frac)
            dt, used, runs = min(dt, dt2), used + dt2, runs + 1
        times[(method, n, t)] = dt
        ref = digests.setdefault((method, n), dig) if t == 1 else digests.get((method, n))
        row.update(seconds=dt, runs=runs, same_as_1_thread=None if ref is None else dig == ref,
                   loadavg=os.getloadavg()[0])
        if t == 1:
            # the 1-thread cell may come after others: check those now
            for c in out["cells"]:
                if c["method"] == method and c["n"] == n and "digest" in c:
                    c["same_as_1_thread"] = c["digest"] == dig
        row["digest"] = dig
        out["cells"].append(row)
        dump()
        t1 = times.get((method, n, 1))
        ratio = f"x{t1 / dt:5.2f}" if t1 else "  -  "
        print(f"  {method:5s} n=2^{n.bit_length() - 1} t={t:2d}  {dt:8.3f} s  {ratio}  same as 1 "
              f"thread: {row['same_as_1_thread']}  (load {row['loadavg']:.2f})", flush=True)
    out["loadavg_after"] = os.getloadavg()
    out["seconds_total"] = time.perf_counter() - start
    # the table: ratio to one thread
    print(f"\nspeed-up over 1 thread ({out['cpu_count']} CPUs, {out['cpu_model']}):")
    head = "  method  n     " + "".join(f"{t:>16d}" for t in threads)
    print(head)
    for n in sorted(ns):
        for m in methods:
            cells = []
            for t in threads:
                v = times.get((m, n, t))
                t1 = times.get((m, n, 1))
                if v is None:
                    cells.append(f"{'-':>16s}")
                else:
                    cells.append(f"{v:8.2f}s" + (f" x{t1 / v:5.1f}" if t1 else "       "))
            print(f"  {m:6s}  2^{n.bit_length() - 1:<3d}" + "".join(cells))
    for c in out["cells"]:
        t1 = times.get((c["method"], c["n"], 1))
        if "seconds" in c and t1:
            c["speedup"] = t1 / c["seconds"]
    dump()
    print(f"load average after: {out['loadavg_after']}; {out['seconds_total']:.0f} s")
    prof = [m for m in args.profile.split(",") if m]
    if prof:
        big = max(ns)
        inputs.setdefault(big, biased_chain(big, 4, 0))
        asked = {int(a) for a in args.profile_threads.split(",") if a}
        ts = sorted({t for t in asked if t <= usable_cores()} or {1, max(threads)})
        if asked - set(ts):
            print(f"  profile threads {sorted(asked - set(ts))} dropped: more than the "
                  f"{usable_cores()} usable cores", flush=True)
        profile([(m, big, t) for m in prof for t in ts], inputs, args.st_frac, out)
        dump()
    return 0


if __name__ == "__main__":
    sys.exit(main())

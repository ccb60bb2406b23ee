"""The teams of engine/cpu/src_cpp/parallel.hpp: persistent crews per calling thread, the team-size
model."""

import json
import math
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.engine.cpu import _core

BARRIER_NS, WAKE_NS = 400.0, 75000.0  # parallel.hpp's kBarrierNs, kWakeNs


def _model(nt, w, c, s):
    """parallel.hpp's team_members at grain 1, written again."""
    if nt <= 1 or c <= 1:
        return 1
    best, best_t = 1, s * w
    for m in range(2, min(nt, c) + 1):
        t = s * (math.ceil(c / m) * w / c + BARRIER_NS * m) + WAKE_NS
        if t < best_t:
            best, best_t = m, t
    return best


def test_team_members_is_the_cost_model_minimum():
    for nt in (1, 2, 3, 8, 16, 64):
        for w in (0.0, 500.0, 5e3, 2e4, 1e5, 1e6, 1e8):
            for c in (1, 2, 7, 64, 1000):
                for s in (1, 10, 1 << 20):
                    assert _core._team_members(nt, w, c, s) == _model(nt, w, c, s), (nt, w, c, s)


def test_team_members_never_uses_more_members_than_pay():
    # a step too small for one barrier stays on the caller; a big step takes the whole team
    assert _core._team_members(16, 300.0, 64, 10_000) == 1
    assert _core._team_members(16, 1e7, 1024, 10_000) == 16
    # never more members than chunks, nor than the team
    assert _core._team_members(16, 1e9, 5, 1) == 5
    assert _core._team_members(3, 1e9, 100, 1) == 3
    # a one-off loop must pay for its wake-up; the same work as one of many steps need not
    assert _core._team_members(2, 100e3, 64, 1) == 1
    assert _core._team_members(2, 100e3, 64, 1000) == 2
    # more work per step never means fewer members
    prev = 1
    for w in np.geomspace(1e2, 1e8, 40):
        m = _core._team_members(16, float(w), 256, 1000)
        assert m >= prev
        prev = m


def test_kt_split_first_round_runs_on_the_team():
    """The first round of KT-SPLIT (one halving, the largest: half of kt's KT-SPLIT work) runs
    pair by pair on the team when its work pays for a second member. It used to be sized by its
    one halving, so it ran on one thread whatever n_threads was (cpu/wall 1.00 at n = 2^16)."""
    n, t, d = 1 << 14, 7, 2
    modes = _core._kt_split_round_modes(n, t, d, 2)
    assert modes[0] is True
    assert modes[1:] == [False] * (t - 1)  # 2^j >= 2 halvings: one per member
    # 16 threads: together until a round has a halving per member
    assert _core._kt_split_round_modes(n, t, d, 16) == [True] * 4 + [False] * 3
    assert _core._kt_split_round_modes(n, t, d, 1) == [False] * t
    assert _core._kt_split_round_modes(64, 3, d, 2) == [False] * 3  # too little work
    # and whichever way a round runs, the split is the same
    from stein_coreset.engine.cpu.bridge import kt_split

    X = 0.7 + 1.5 * np.random.default_rng(0).standard_normal((4096, d))
    kern = sc.SteinKernel(sc.IMQ(sigma=math.sqrt(8)))
    outs = [kt_split(kern.bind(X, -X, n_threads=k), np.arange(4096), 4, 0.5, 3)
            for k in (1, 2, 3)]
    assert _core._kt_split_round_modes(4096, 4, d, 2)[0] is True
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


def test_team_probes_measure_positive_costs():
    assert _core._team_probe_step_ns(2, 2000) > -1e6  # noise may make it slightly negative
    assert math.isfinite(_core._team_probe_step_ns(1, 100))
    assert 0.0 < _core._team_probe_wake_ns(2, 2) < 1e9


_EXIT = """
import threading, numpy as np, stein_coreset as sc
X = 0.7 + 1.5 * np.random.default_rng(3).standard_normal((1500, 3))
def run():
    for m in ("st", "skt", "lsr"):
        kw = {"tau": 0.5} if m == "lsr" else {}
        sc.compress(X, -X, size=24, method=m, seed=1, n_threads=3, **kw)
run()                                  # the main thread's crew
t = threading.Thread(target=run)       # a crew that ends with its thread
t.start(); t.join()
d = threading.Thread(target=run, daemon=True)  # a daemon thread's crew, alive at exit
d.start(); d.join()
print("done")
"""


def test_interpreter_exits_cleanly_after_parallel_calls():
    env = dict(os.environ, STEIN_CORESET_TEAM_GRAIN="0")  # every loop on the whole team
    got = subprocess.run([sys.executable, "-c", _EXIT], env=env, capture_output=True, text=True,
                         cwd="/", timeout=300)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "done"


_FORK = """
import os, numpy as np, stein_coreset as sc
X = 0.7 + 1.5 * np.random.default_rng(3).standard_normal((1200, 3))
a = sc.compress(X, -X, size=24, method="skt", seed=1, n_threads=3).indices
pid = os.fork()
if pid == 0:  # the parent's workers do not exist here: the child's teams start their own
    b = sc.compress(X, -X, size=24, method="skt", seed=1, n_threads=3).indices
    os._exit(0 if np.array_equal(a, b) else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_runs_parallel_loops():
    env = dict(os.environ, STEIN_CORESET_TEAM_GRAIN="0")
    got = subprocess.run([sys.executable, "-W", "ignore", "-c", _FORK], env=env,
                         capture_output=True, text=True, cwd="/", timeout=300)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "0"


def test_two_python_threads_each_get_their_own_team():
    rng = np.random.default_rng(4)
    X = 0.7 + 1.5 * rng.standard_normal((1500, 3))
    ref = {m: sc.compress(X, -X, size=24, method=m, seed=2, n_threads=1).indices
           for m in ("st", "skt")}
    errors = []

    def run(m):
        try:
            for _ in range(3):
                got = sc.compress(X, -X, size=24, method=m, seed=2, n_threads=2).indices
                if not np.array_equal(got, ref[m]):
                    errors.append(m)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    ts = [threading.Thread(target=run, args=(m,)) for m in ("st", "skt", "st", "skt")]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in ts)
    assert errors == []


def test_team_stats_account_each_region_without_changing_it():
    """The region accounting (off by default) records Stein thinning's one region of m steps
    with its members' busy time within members x wall and its combines within the wall; the
    selection is the one without accounting; once off it records nothing."""
    from stein_coreset.engine.cpu.bridge import stein_thinning

    rng = np.random.default_rng(0)
    X = 0.7 + 1.5 * rng.standard_normal((4096, 3))
    K = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(X, -X, n_threads=2)
    _core._team_stats(False)  # off, totals cleared
    want = stein_thinning(K, 300)
    assert _core._team_stats(True) == []
    got = stein_thinning(K, 300)
    sites = _core._team_stats(False)
    np.testing.assert_array_equal(got, want)
    st = [e for e in sites if "stein_thinning" in e["site"] and not e["loop"]]
    assert len(st) == 1 and st[0]["regions"] == 1 and st[0]["steps"] == 300, sites
    e = st[0]
    assert e["team"] == 2 and 1 <= e["members"] <= 2 and not e["nested"]
    assert e["chunks"] >= 300 and 0.0 < e["combine_s"] < e["wall_s"]
    assert 0.0 < e["busy_s"] <= e["members"] * e["wall_s"] * 1.01
    stein_thinning(K, 300)
    assert _core._team_stats() == []


_TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "asv_benchmarks", "scripts")


@pytest.mark.skipif(not os.path.isdir(_TOOLS), reason="no asv_benchmarks/scripts here")
def test_threads_table_prints_probes_and_a_table_with_equal_selections(tmp_path):
    script = os.path.join(_TOOLS, "threads_table.py")
    probe = subprocess.run([sys.executable, script, "--probe-only"], capture_output=True,
                           text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr
    # (the usable cores may be 1 here: an OMP_NUM_THREADS limit or a CPU affinity)
    assert ("a step's barrier" in probe.stdout and "wake-up" in probe.stdout) or (
        "one usable core" in probe.stdout)
    table = os.path.join(str(tmp_path), "table.json")
    got = subprocess.run([sys.executable, script, "--n", "9", "--threads", "1,2,64",
                          "--methods", "st,kt", "--budget-s", "60", "--profile", "skt",
                          "--json", table], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    assert "speed-up over 1 thread" in got.stdout
    assert "profile: skt n=2^9 t=1" in got.stdout and "serial share" in got.stdout
    # the profile names the regions' call sites: SKT's Stein thinning and its KT-Swap
    with open(table) as f:
        out = json.load(f)
    prof = out["profile"]
    threads = [1, 2] if out["usable_cores"] >= 2 else [1]  # 1 and the most of --threads
    assert [(p["method"], p["threads"]) for p in prof] == [("skt", t) for t in threads]
    for p in prof:
        labels = {s["label"].split("#")[0] for s in p["sites"]}
        assert {"stein_thinning steps", "kt_swap_refine steps"} <= labels, labels
        assert 0.0 <= p["serial_share"] <= 1.0
    assert "same as 1 thread: False" not in got.stdout
    topo = out["topology"]
    assert out["usable_cores"] <= topo["cpus"]  # affinity, less any quota or OpenMP limit
    if topo["physical_cores"] is not None:  # Linux sysfs
        assert 1 <= topo["physical_cores"] <= topo["cpus"]
        assert topo["physical_cores"] * topo["smt"] >= topo["cpus"]
        assert "physical cores" in got.stdout
    if (os.cpu_count() or 1) < 64:
        assert "dropped" in got.stdout  # 64 threads: more than the cores here


@pytest.mark.skipif(not os.path.isdir(_TOOLS), reason="no asv_benchmarks/scripts here")
def test_threads_table_reads_linux_cpu_lists():
    import runpy
    import types

    threads_table = types.SimpleNamespace(**runpy.run_path(os.path.join(_TOOLS,
                                                                         "threads_table.py")))
    assert threads_table._cpu_list("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert threads_table._cpu_list("5") == [5]
    text = threads_table.describe_topology({"cpus": 16, "physical_cores": 8, "smt": 2,
                                            "l3_domains": 2, "l3_size": "32768K",
                                            "numa_nodes": 1})
    assert text.startswith("16 usable CPUs on 8 physical cores (2 hardware thread(s) a core)")

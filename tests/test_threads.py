"""The threading policy (stein_coreset._threads): one number, from the user or the usable cores."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset._threads import effective_n_threads, usable_cores


def test_effective_n_threads_default_is_usable_cores():
    assert effective_n_threads() == usable_cores() >= 1
    assert effective_n_threads(-1) == usable_cores()
    assert effective_n_threads(3) == 3


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True])
def test_effective_n_threads_rejects_bad_values(bad):
    with pytest.raises((TypeError, ValueError), match="n_threads"):
        effective_n_threads(bad)


def test_compress_reports_n_threads_and_rank_from_tau():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 2))
    res = sc.compress(X, -X, size=16, method="lsr", tau=0.4, n_threads=1, seed=0)
    assert res.info["n_threads"] == 1
    assert res.info["rank_from_tau"] == 11  # ceil(400^0.4) = ceil(10.98)
    with pytest.raises(ValueError, match="tau"):
        sc.compress(X, -X, size=16, method="st", tau=0.4)
    with pytest.raises(ValueError, match="tau"):
        sc.compress(X, -X, size=16, method="lsr", tau=1.5)


# ---- the parallel paths at small n: STEIN_CORESET_TEAM_GRAIN=0 puts every loop on the whole team

_FINGERPRINT = """
import hashlib, sys, numpy as np, stein_coreset as sc
X = 0.7 + 1.5 * np.random.default_rng(5).standard_normal((2600, 3))
out = []
for t in [int(a) for a in sys.argv[1:]]:
    for m, kw in (("st", {}), ("skt", {}), ("kt", {}), ("sr", {}), ("sc", {}),
                  ("lskt", {"tau": 0.5}), ("lsr", {"tau": 0.5}), ("lsc", {"tau": 0.5})):
        r = sc.compress(X, -X, size=48, method=m, seed=7, n_threads=t, **kw)
        h = hashlib.sha1(np.asarray(r.indices).tobytes() + np.asarray(r.weights).tobytes())
        out.append(f"{m}:{t}:{h.hexdigest()[:12]}")
print(" ".join(out))
"""


def _fingerprints(env, threads):
    import os
    import subprocess
    import sys

    e = dict(os.environ)
    e.update(env)
    got = subprocess.run(
        [sys.executable, "-c", _FINGERPRINT, *map(str, threads)], env=e, capture_output=True,
        text=True, cwd="/", timeout=600, check=True,
    ).stdout.split()
    return {tuple(s.split(":")[:2]): s.split(":")[2] for s in got}


def test_parallel_regions_give_the_same_results_for_any_team_and_grain():
    # grain 0: every region (ST steps, KT-SPLIT halvings, KT-Swap, AMD steps, the one-off
    # loops) on the whole team, with more members than chunks at n_threads = 5 and stealing;
    # the default grain keeps these small loops serial. All must agree with one thread.
    full = _fingerprints({"STEIN_CORESET_TEAM_GRAIN": "0"}, (1, 3, 5))
    serial = _fingerprints({"STEIN_CORESET_TEAM_GRAIN": "1"}, (2,))
    for (m, t), h in full.items():
        assert h == full[(m, "1")] == serial[(m, "2")], (m, t)

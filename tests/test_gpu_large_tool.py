"""tools/device/gpu_large.py, the stages of the prepared GPU run (tools/device/device_run.sh)
that gpu_check does not cover, run here in a subprocess against a stand-in ``cupy`` that gives
NumPy arrays: the library then runs its CPU engine, and each stage's own code — its calls into
the library's internals, its rows, its JSON — is what is checked, so that an API it calls has
not drifted under it before the device's few minutes are spent on it."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "device" / "gpu_large.py"

# What gpu_large.py uses of CuPy, over NumPy. Its `ndarray` is a class no array is an instance
# of, so the library never takes a NumPy array for a CuPy one.
FAKE_CUPY = textwrap.dedent(
    """
    import numpy as _np

    float64 = _np.float64
    asnumpy = _np.asarray
    asarray = _np.asarray
    sum = _np.sum
    __version__ = "0-standin"


    class ndarray:
        pass


    class RandomState:
        def __init__(self, seed):
            self._g = _np.random.default_rng(seed)

        def standard_normal(self, shape, dtype=_np.float64):
            return self._g.standard_normal(shape).astype(dtype)

        def random_sample(self, n):
            return self._g.random(n)


    random = type("random", (), {"RandomState": RandomState})


    class _Pool:
        def free_all_blocks(self):
            pass

        def total_bytes(self):
            return 0


    def get_default_memory_pool():
        return _Pool()


    class _Device:
        attributes = {"MultiProcessorCount": 8}

        def __init__(self, device_id=0):
            self.id = device_id

        def synchronize(self):
            pass


    cuda = type("cuda", (), {"Device": _Device})
    """
)


def _run(tmp_path, *args):
    fake = tmp_path / "fake"
    (fake / "cupy").mkdir(parents=True, exist_ok=True)
    (fake / "cupy" / "__init__.py").write_text(FAKE_CUPY)
    out = tmp_path / "rows.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(fake)] + [p for p in sys.path if p and Path(p).resolve() != ROOT]))
    got = subprocess.run([sys.executable, str(SCRIPT), *args, "--json", str(out)],
                         capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize(
    "stage, keys",
    [
        (["--loops", "--n", "2048"], {"us_per_step", "max_blocks", "same_picks_as_graph"}),
        (["--amd", "--n", "2048"], {"cpu_seconds", "xp_seconds", "fused_max_rel_diff"}),
        (["--n", "2048"], {"seconds", "peak_device_gib", "ksd"}),
        (["--diagnose-lskt", "--n", "4096"], {"ld_max_abs_w_diff", "ktcpp_same",
                                              "kt_split_rows_same"}),
        (["--profile", "--method", "lskt,st,sr,compresspp", "--n", "2048"], {"seconds"}),
        (["--dksd", "--n", "300"], {"cpu_seconds", "auto_seconds", "xp_rel_diff"}),
    ],
    ids=["loops", "amd", "large", "diagnose", "profile", "dksd"],
)
def test_gpu_large_stage_runs_on_a_numpy_standin_for_cupy(tmp_path, stage, keys):
    rows = _run(tmp_path, *stage)
    assert rows and all("error" not in r for r in rows), rows
    assert keys <= set().union(*rows), rows
    if "--loops" in stage:
        assert [r["max_blocks"] for r in rows] == [8, 8, 4, 2, 1]
        assert all(r["same_picks_as_graph"] for r in rows[1:])
    if "--profile" in stage:
        assert [r["method"] for r in rows] == ["lskt", "st", "sr", "compresspp"]
    if "--dksd" in stage:  # the stand-in's arrays are NumPy's: "auto" is the C++ again
        assert rows[0]["auto_backend"] == "cpu" and rows[0]["auto_rel_diff"] == 0.0
        assert rows[0]["xp_backend"] == "xp" and rows[0]["xp_rel_diff"] < 1e-12
    if "--diagnose-lskt" in stage:  # one engine here: the two sides are one computation
        assert rows[0]["ld_max_abs_w_diff"] == 0.0 and rows[0]["ktcpp_same"]


def test_gpu_large_dask_stage_runs_on_a_numpy_standin_for_cupy(tmp_path):
    pytest.importorskip("distributed")
    rows = _run(tmp_path, "--dask", "--n", "4096")
    assert {r["method"] for r in rows} == {"st", "skt"}
    assert all(r["same_indices"] and r["rel_ksd"] == 0.0 for r in rows), rows

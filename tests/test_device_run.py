"""The GPU machine's prepared run (tools/device/device_run.sh), dry: both stages' commands on
the CPU at tiny sizes (the kernels on the simulator, array_api_strict for CuPy, stand-ins for
nvidia-smi and compute-sanitizer). About a minute, so xslow here; CI (.ci/run) runs the same
dry run as a step of its own."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The files each stage writes to $OUT (at most 8 come back from the machine); n is tiny in
#: the dry run (2^14 and 2^16 become 256, 2^20 512, 2^24 1024).
STAGE_FILES = {
    "check": {"check.log", "tests.xml", "racecheck.log", "synccheck.log", "tour_full.json",
              "gpu_check_256.json"},
    "time": {"time.log", "gpu_check_256.json", "lskt_512.json", "lskt_1024.json",
             "threads_table.json"},
}


@pytest.mark.xslow
@pytest.mark.skipif(shutil.which("g++") is None, reason="the simulator needs g++")
@pytest.mark.parametrize("stage", ["check", "time"])
def test_device_stage_dry_run_writes_its_files_and_at_most_eight(stage, tmp_path):
    pytest.importorskip("pytest_timeout")
    env = dict(os.environ, DRY_RUN="1", PYTHON=sys.executable, OUT=str(tmp_path))
    r = subprocess.run(["bash", "tools/device/device_run.sh", stage], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    files = {p.name for p in tmp_path.iterdir()}
    assert files == STAGE_FILES[stage]
    assert len(files) <= 8

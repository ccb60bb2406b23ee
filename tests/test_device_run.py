"""The GPU machine's prepared run (tools/device/device_run.sh): its plan fits the lease with room
to rerun, and, dry, every step's command runs on the CPU at tiny sizes (the kernels on the
simulator, array_api_strict for CuPy, stand-ins for nvidia-smi and compute-sanitizer). The dry
run takes a few minutes, so xslow here; CI (.ci/run) runs the same dry run as a step of its
own."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The files the plan writes to $OUT (at most 8 come back from the machine); n is tiny in the
#: dry run (2^14 and 2^16 become 256, 2^20 512, 2^22 1024).
PLAN_FILES = {"plan.log", "tests.xml", "gpu_check_256.json", "lskt_512.json",
              "threads_table.json", "sanitize.log", "lskt_1024.json"}


def _run(tmp_path, **env):
    env = dict(os.environ, DRY_RUN="1", PYTHON=sys.executable, OUT=str(tmp_path), **env)
    return subprocess.run(["bash", "tools/device/device_run.sh"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)


def test_the_plan_projects_at_most_twelve_minutes_and_says_so(tmp_path):
    r = _run(tmp_path, STEPS="none")
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(s for s in r.stdout.splitlines() if "projected device time" in s)
    projected = int(line.split("projected device time ")[1].split(" s")[0])
    assert projected <= 720, line


def test_a_plan_over_its_budget_fails_before_any_step(tmp_path):
    r = _run(tmp_path, STEPS="none", PLAN_BUDGET_S="600")
    assert r.returncode == 1
    assert "exceeds 600 s" in r.stdout + r.stderr


@pytest.mark.xslow
@pytest.mark.skipif(shutil.which("g++") is None, reason="the simulator needs g++")
def test_the_dry_run_writes_its_files_and_at_most_eight(tmp_path):
    pytest.importorskip("pytest_timeout")
    r = _run(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    files = {p.name for p in tmp_path.iterdir()}
    assert files == PLAN_FILES
    assert len(files) <= 8

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


def _needs():
    text = (ROOT / "tools/device/device_run.sh").read_text()
    return text.split('\nNEEDS="', 1)[1].split('"', 1)[0].split()


def test_the_compiler_free_path_of_ci_holds_every_command_the_plan_needs():
    # CI runs the installed wheel's tests with a PATH of linked tools and no compiler; the two
    # tests above run the script there
    ci = (ROOT / ".ci/run").read_text()
    linked = ci.split("for tool in ", 1)[1].split("; do", 1)[0].replace("\\\n", " ").split()
    assert set(_needs()) <= set(linked), sorted(set(_needs()) - set(linked))


def test_a_missing_command_is_named_before_anything_runs(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    r = subprocess.run([shutil.which("bash"), "tools/device/device_run.sh"], cwd=ROOT,
                       env=dict(os.environ, DRY_RUN="1", PATH=str(empty), OUT=str(tmp_path)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "needs these commands on PATH: " + " ".join(_needs()) in r.stderr
    assert not (tmp_path / "plan.log").exists()


@pytest.mark.xslow
@pytest.mark.skipif(shutil.which("g++") is None, reason="the simulator needs g++")
def test_the_dry_run_writes_its_files_and_at_most_eight(tmp_path):
    pytest.importorskip("pytest_timeout")
    r = _run(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    files = {p.name for p in tmp_path.iterdir()}
    assert files == PLAN_FILES
    assert len(files) <= 8

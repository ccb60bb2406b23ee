"""tools/device/gpu_check.py, the script of the one prepared GPU run (tools/device/device_run.sh),
run here on array_api_strict: every code path it takes on the device but the CuPy calls — the
agreement check, the goodpoints.jax side-by-side and the JSON — so that a broken script or a
missing import shows up here and not in the device's few minutes."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

DEVICE = Path(__file__).resolve().parents[1] / "tools" / "device"
if not DEVICE.is_dir():
    pytest.skip("tools/device/ not in this checkout", allow_module_level=True)


def _script(name):
    """tools/device/<name>.py as the module it is when run: sys.modules holds it under its name,
    so its sibling's ``import goodpoints_jax`` finds the one loaded here."""
    spec = importlib.util.spec_from_file_location(name, DEVICE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


gpj = _script("goodpoints_jax")
gpu_check = _script("gpu_check")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_gpu_check_scores_goodpoints_jax_beside_every_method_it_compares(
    tmp_path, monkeypatch, capsys
):
    pytest.importorskip("array_api_strict")
    if gpj.missing() is not None:
        pytest.skip(f"goodpoints.jax: {gpj.missing()}")
    monkeypatch.setattr(gpu_check, "GP_WARM_MAX_N", 0)  # one (compiling) call: the test's time
    out = tmp_path / "table.json"
    methods = ["st", "skt", "lskt", "sc"]  # (sr and lsr end with a QP that needs proxsuite)
    rc = gpu_check.main(["--xp", "strict", "--n", "256", "--methods", *methods, "--goodpoints",
                         "--gp-methods", *methods, "--json", str(out)])
    assert rc == 0, capsys.readouterr().out
    table = json.loads(out.read_text())
    rows = {r["method"]: r for r in table["rows"]}
    assert set(rows) == set(methods)
    for r in rows.values():
        assert r["agree"] and "gp_error" not in r, r
        assert r["gp_ksd"] > 0.0 and r["gp_s"] > 0.0 and r["gp_includes_compile"]
    # Stein thinning is deterministic: the authors' code on the same kernel (same bandwidth,
    # same scores) takes the same greedy steps, so the two KSDs are one number
    assert rows["st"]["gp_ksd"] == pytest.approx(rows["st"]["ksd_gpu"], rel=1e-9)


def test_gpu_check_refuses_a_method_goodpoints_jax_lacks():
    with pytest.raises(SystemExit):
        gpu_check.main(["--xp", "strict", "--goodpoints", "--gp-methods", "rt"])


def test_gpu_check_says_why_goodpoints_jax_cannot_run(monkeypatch, capsys):
    np = pytest.importorskip("numpy")
    monkeypatch.setattr(gpj, "missing", lambda: "ModuleNotFoundError: No module named 'x'")
    X = np.zeros((4, 2))
    row = gpu_check._goodpoints_row("st", X, X, 2, 0, None, 1.0)
    assert row == {"gp_error": "not importable: ModuleNotFoundError: No module named 'x'"}
    assert "No module named 'x'" in capsys.readouterr().out

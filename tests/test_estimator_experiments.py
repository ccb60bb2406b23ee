"""The estimator experiment scripts of docs/experiments/estimators run (``--quick``), write their
figure and still show the paper's qualitative result."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

FOLDER = Path(__file__).resolve().parents[1] / "docs" / "experiments" / "estimators"


def _quick(name, tmp_path):
    spec = importlib.util.spec_from_file_location(f"_experiment_{name}", FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / f"{name}.png"
    result = module.main(["--quick", "--out", str(out)])
    assert out.stat().st_size > 1000
    return result


def test_student_t_scale_script_gives_every_method_a_sane_rmse(tmp_path):
    rmse = _quick("student_t_scale", tmp_path)
    assert {"SM", "KSD", "NNSM", "NNKSD", "DKSD"} <= set(rmse)
    assert all(0 < v < 0.5 for v in rmse.values())


def test_contamination_script_robust_dksd_stays_bounded_efficient_follows_dirac(tmp_path):
    err, slope = _quick("contamination", tmp_path)
    assert err["robust DKSD"].max() < 0.5
    assert err["efficient DKSD"][-1] > 2.0 and slope > 0.1


def test_generalized_gamma_script_is_robust_once_alpha_reaches_power_minus_one(tmp_path):
    results = _quick("generalized_gamma", tmp_path)
    err = results[5.0]  # alphas 0, 2, 4, 6 in the quick run
    assert err["SM"] > 1.0 and err["DKSD"][0] > 1.0
    assert err["DSM"][-1] < 0.3 and err["DKSD"][-1] < 0.3


def test_bessel_location_script_ksd_beats_sm_on_rough_density_and_loss_spikes(tmp_path):
    results, (below, above) = _quick("bessel_location", tmp_path)
    rough, smooth = results[0.6], results[2.0]
    best_ksd = min(v[0] for k, v in rough.items() if k.startswith("KSD"))
    assert best_ksd < rough["SM"][0]
    assert all(v[0] < 0.5 for v in smooth.values())
    assert below < -10 < 10 < above  # the U-statistic loss is unbounded below near x_i

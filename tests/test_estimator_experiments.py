"""The estimator experiment scripts of docs/experiments/estimators run (``--quick``), write their
figure and still show the paper's qualitative result."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

FOLDER = Path(__file__).resolve().parents[1] / "docs" / "experiments" / "estimators"


def _quick(name, tmp_path, figure=True):
    spec = importlib.util.spec_from_file_location(f"_experiment_{name}", FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / f"{name}.png"
    result = module.main(["--quick", "--out", str(out)] if figure else ["--quick"])
    if figure:
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


def test_theta0_grid_script_finds_no_converged_wrong_fit(tmp_path):
    res = _quick("theta0_grid", tmp_path)
    assert set(res) == {"SM", "KSD", "DKSD"}
    assert all(r["counts"]["converged, WRONG"] == 0 for r in res.values())


def test_scale_equivariance_script_gives_the_same_fit_in_every_unit(tmp_path):
    res = _quick("scale_equivariance", tmp_path, figure=False)
    assert all(r["converged"] == 3 and r["worst"] < 0.01 for r in res.values())


def test_reproducers_script_runs_and_the_default_fit_repeats(tmp_path, capsys):
    a, b = _quick_main("reproducers", [])
    assert (a.theta == b.theta).all()
    out = capsys.readouterr().out
    assert "rho" in out and "identical = True" in out and "ABNORMAL" not in out


def test_coverage_script_reports_every_cell_and_warns_on_cauchy_sm(tmp_path):
    res = _quick("coverage", tmp_path)
    assert len(res) == 15
    assert res["cauchy", "sm"]["warned"].all() and not res["gaussian", "sm"]["warned"].any()


def test_tail_check_script_separates_cauchy_from_gaussian(tmp_path):
    res = _quick("tail_check", tmp_path, figure=False)
    (g, _), (c, _) = res["Gaussian (0.5, 2)", "sm"], res["Cauchy data", "sm"]
    assert g.max() < 0.5 < c.min()


def _quick_main(name, argv):
    spec = importlib.util.spec_from_file_location(f"_experiment_{name}", FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(argv)

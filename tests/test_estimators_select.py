"""select_lengthscale: K-fold held-out comparison of kernel lengthscales for KSD / DKSD fits."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import estimators as est


@pytest.fixture(scope="module")
def gaussian_sample():
    model = est.Gaussian(d=1)
    return model, model.sample(150, [0.0, 1.0], np.random.default_rng(0))


@pytest.mark.parametrize("criterion", ["reference", "sm"])
def test_select_lengthscale_never_picks_a_flat_kernel_that_loses_the_scale(gaussian_sample,
                                                                           criterion):
    # a Gaussian kernel 100 times wider than the data is flat: the KSD then only sees the mean
    # score, the scale is not identified and the fits run to the boundary
    model, X = gaussian_sample
    sel = est.select_lengthscale(model, X, [0.3, 1.0, 100.0], kernel=sc.Gaussian(sigma=1.0),
                                 criterion=criterion, n_splits=3)
    assert sel.lengthscale in (0.3, 1.0)
    assert sel.n_converged[2] == 0 and sel.scores[2] > max(sel.scores[:2])
    assert isinstance(sel.kernel, sc.Gaussian) and sel.kernel.sigma == sel.lengthscale
    assert sel.fold_scores.shape == (3, 3) and np.all(np.isfinite(sel.score_se[:2]))
    assert "*" in sel.table().splitlines()[1 + [0.3, 1.0].index(sel.lengthscale)]


def test_select_lengthscale_default_candidates_are_median_heuristic_multiples(gaussian_sample):
    model, X = gaussian_sample
    sel = est.select_lengthscale(model, X, n_splits=2, seed=1)
    med = sc.kernels.median_bandwidth(X)
    np.testing.assert_allclose(sel.lengthscales, med * np.array(est.select.DEFAULT_FACTORS))
    assert sel.reference_lengthscale == pytest.approx(med)
    assert sel.lengthscale in sel.lengthscales and isinstance(sel.kernel, sc.IMQ)


def test_select_lengthscale_is_reproducible_for_a_fixed_seed(gaussian_sample):
    model, X = gaussian_sample
    a = est.select_lengthscale(model, X, [0.5, 2.0], n_splits=2, seed=3)
    b = est.select_lengthscale(model, X.tolist(), [0.5, 2.0], n_splits=2, seed=3)
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)


def test_select_lengthscale_validates_its_arguments(gaussian_sample):
    model, X = gaussian_sample
    with pytest.raises(ValueError, match="discrepancy"):
        est.select_lengthscale(model, X, [1.0], discrepancy="sm")
    with pytest.raises(ValueError, match="criterion"):
        est.select_lengthscale(model, X, [1.0], criterion="loss")
    with pytest.raises(ValueError, match="lengthscales"):
        est.select_lengthscale(model, X, [1.0, -2.0])
    with pytest.raises(ValueError, match="lengthscales"):
        est.select_lengthscale(model, X, [])
    with pytest.raises(ValueError, match="n_splits"):
        est.select_lengthscale(model, X, [1.0], n_splits=1)
    with pytest.raises(ValueError, match="n_splits"):
        est.select_lengthscale(model, X[:5], [1.0], n_splits=3)
    with pytest.raises(TypeError, match="kernel"):
        est.select_lengthscale(model, X, [1.0], kernel="imq")
    with pytest.raises(TypeError, match="fit_kwargs"):
        est.select_lengthscale(model, X, [1.0], fit_kwargs={"kernel": sc.IMQ()})
    with pytest.raises(ValueError, match="NaN"):
        est.select_lengthscale(model, np.full((10, 1), np.nan), [1.0])
    bessel = est.SymmetricBessel(s=0.6, scale=1.0)
    with pytest.raises(ValueError, match="criterion='sm'"):
        est.select_lengthscale(bessel, X, [1.0], criterion="sm")


def test_select_lengthscale_table_printed_in_the_docs_is_what_the_example_prints():
    from pathlib import Path

    model = est.StudentT(nu=5.0, scale=1.0)
    X = model.sample(300, [0.0], np.random.default_rng(0))
    sel = est.select_lengthscale(model, X, kernel=sc.Gaussian(sigma=1.0), n_splits=3)
    page = (Path(__file__).resolve().parents[1] / "docs" / "estimators.md").read_text()
    assert str(sel) in page

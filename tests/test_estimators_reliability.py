"""fit() reports what happened: excursions, runaways, kinks, stochastic noise, standard errors
(Barp et al., 2019: Sec. 4.1 non-smooth models, Eq. 16 Riemannian SGD, Thms. 4 and 6)."""

import contextlib
import io

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import estimators as est
from stein_coreset.estimators import dksd as dksd_mod
from stein_coreset.estimators import inference


class _UndeclaredLaplace(est.SymmetricBessel):
    """The Laplace model as a user would write it: its kink in loc is not declared."""

    nonsmooth_params = ()


class _NaNBeyond(est.Gaussian):
    """A Gaussian whose score is NaN once the location passes 2 (a model that overflows)."""

    def score(self, x, theta):
        s = super().score(x, theta)
        return s * np.nan if theta[0] > 2.0 else s


def _laplace_sample():
    return est.SymmetricBessel(s=1.0).sample(500, [0.0, 1.0], np.random.default_rng(8))


@pytest.mark.parametrize("optimizer", ["lbfgs", "riemannian_sgd", "sgd"])
def test_gradient_based_fits_refuse_a_location_where_the_score_has_a_kink(optimizer):
    # before: lbfgs from [0.7, 1] returned [0.7, 3.17] with converged=True
    with pytest.raises(ValueError, match="not differentiable in loc.*nelder_mead"):
        est.fit(est.SymmetricBessel(s=1.0), _laplace_sample(), discrepancy="ksd",
                kernel=sc.Gaussian(1.0), optimizer=optimizer, theta0=[0.7, 1.0])


def test_the_laplace_location_fixed_leaves_a_smooth_scale_fit():
    f = est.fit(est.SymmetricBessel(s=1.0, loc=0.0), _laplace_sample(), discrepancy="ksd",
                kernel=sc.Gaussian(1.0), optimizer="lbfgs", theta0=[2.0])
    assert f.converged and abs(f.theta[0] - 1.0) < 0.2 and f.stderr is not None


def test_a_fit_whose_gradient_is_zero_while_the_loss_changes_is_not_converged():
    # the undeclared kink: the location gradient is identically 0 while the loss moves by jumps
    X = _laplace_sample()
    model = _UndeclaredLaplace(s=1.0)
    f = est.fit(model, X, discrepancy="ksd", kernel=sc.Gaussian(1.0), optimizer="lbfgs",
                theta0=[0.7, 1.0])
    assert not f.converged and "not differentiable" in f.message
    # the definition: the loss does change along loc, and the gradient says it does not
    k = sc.Gaussian(1.0)
    g = est.loss_and_grad(model, f.theta, X, kernel=k)[1]
    assert g[0] == 0.0
    step = f.theta + [0.05, 0.0]
    assert abs(est.loss(model, step, X, kernel=k) - est.loss(model, f.theta, X, kernel=k)) > 1e-4


@pytest.mark.parametrize("optimizer", ["lbfgs", "sgd", "riemannian_sgd", "nelder_mead"])
def test_a_non_finite_score_during_the_fit_returns_the_best_finite_iterate(optimizer):
    # before: ValueError("model.score returned NaN or inf ...") from inside the optimiser
    X = 5.0 + np.random.default_rng(0).standard_normal((200, 1))
    f = est.fit(_NaNBeyond(), X, discrepancy="sm", optimizer=optimizer, theta0=[0.0, 1.0],
                lr=0.5, seed=0)
    assert not f.converged and "NaN" in f.message and "theta" in f.message
    assert np.all(np.isfinite(f.theta)) and f.theta[0] <= 2.0 and np.isfinite(f.loss)
    # the best finite iterate: no worse than the start
    assert f.loss <= est.loss(_NaNBeyond(), [0.0, 1.0], X, discrepancy="sm")


def test_a_bad_sample_still_raises():
    X = np.random.default_rng(0).standard_normal((50, 1))
    X[3] = np.nan
    with pytest.raises(ValueError, match="NaN or inf in 1"):
        est.fit(est.Gaussian(), X, discrepancy="sm", optimizer="lbfgs")


@pytest.fixture
def efficient_student_t():
    """Sec. 4.2's "efficient" diffusion for the Student-t scale, m -> 0 as scale -> inf (so the
    DKSD loss tends to 0 there), and a sample of the model."""
    nu = 5.0
    X = est.StudentT(nu=nu).sample(300, [0.0, 1.0], np.random.default_rng(0))

    def m(x, t):
        z = (x[:, 0] - t[0]) / t[1]
        return z * (1.0 + z * z / nu)

    return est.StudentT(nu=nu), X, m


def test_a_scale_that_runs_away_on_a_plateau_is_not_converged(efficient_student_t):
    # before: lbfgs from [0, 3] stopped at scale ~ 7.7e3 with converged=True
    model, X, m = efficient_student_t
    f = est.fit(model, X, discrepancy="dksd", kernel=sc.IMQ(1.0), diffusion=m,
                optimizer="lbfgs", theta0=[0.0, 3.0])
    assert f.theta[1] > 100.0
    assert not f.converged and "runs away" in f.message


def test_an_sgd_run_to_infinity_is_not_converged(efficient_student_t):
    # before: riemannian_sgd reached scale ~ 1e20 and said "stationary"
    model, X, m = efficient_student_t
    f = est.fit(model, X, discrepancy="dksd", kernel=sc.IMQ(1.0), diffusion=m, seed=0)
    assert not f.converged


def test_the_default_stochastic_fit_varies_across_seeds_by_less_than_its_standard_error():
    # before: the last iterate of 500 constant steps; here the Polyak-Ruppert average
    model = est.Gaussian(d=1)
    X = model.sample(1000, [0.5, 2.0], np.random.default_rng(0))
    ref = est.fit(model, X, discrepancy="sm", optimizer="lbfgs")
    fits = [est.fit(model, X, discrepancy="sm", seed=s) for s in range(6)]
    thetas = np.array([f.theta for f in fits])
    assert np.all(np.ptp(thetas, axis=0) <= ref.stderr)
    for f in fits:
        if f.converged:  # converged means within a fraction of a standard error of the optimum
            assert np.all(np.abs(f.theta - ref.theta) <= 0.75 * ref.stderr)


def test_a_stochastic_fit_stopped_too_early_is_polished_or_not_converged():
    model = est.Gaussian(d=1)
    X = model.sample(1000, [0.5, 2.0], np.random.default_rng(0))
    raw = est.fit(model, X, discrepancy="sm", steps=30, seed=0, polish=False)
    assert not raw.converged and "steps" in raw.message
    # the default polishes the averaged iterate to the minimiser and says so
    ref = est.fit(model, X, discrepancy="sm", optimizer="lbfgs")
    f = est.fit(model, X, discrepancy="sm", steps=30, seed=0)
    assert f.converged and "steps" in f.message and "polishing Newton steps" in f.message
    assert np.all(np.abs(f.theta - ref.theta) <= 0.01 * ref.stderr)


def test_row_sums_are_the_stein_kernel_matrix_row_sums_without_the_diagonal():
    model = est.StudentT(nu=5.0)
    X = model.sample(40, [0.1, 1.2], np.random.default_rng(0))
    th = np.array([0.2, 1.1])
    K = sc.SteinKernel(sc.IMQ(1.0)).matrix(X, model.score(X, th))
    got = dksd_mod.row_sums(model, X, th, sc.IMQ(1.0), None)
    np.testing.assert_allclose(got, K.sum(1) - np.diag(K), rtol=1e-12)


def test_per_sample_contributions_are_the_hoeffding_projection_by_brute_force():
    # c_i = (2 / (n - 1)) sum_{j != i} grad_theta k0(x_i, x_j), k0 from the Stein kernel matrix
    model = est.Gaussian(d=1)
    X = model.sample(30, [0.3, 1.5], np.random.default_rng(1))
    th = np.array([0.25, 1.4])
    n = X.shape[0]

    def offdiag_rows(t):
        K = sc.SteinKernel(sc.IMQ(1.0)).matrix(X, model.score(X, t))
        return K.sum(1) - np.diag(K)

    want = np.stack([(offdiag_rows(th + e) - offdiag_rows(th - e)) / 2e-6
                     for e in np.eye(2) * 1e-6], axis=1) * 2.0 / (n - 1)
    got = inference.per_sample_contributions(model, X, th, "ksd", sc.IMQ(1.0), None)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)
    # their mean is twice the gradient of the U-statistic
    g = est.loss_and_grad(model, th, X, kernel=sc.IMQ(1.0))[1]
    np.testing.assert_allclose(got.mean(0), 2 * g, rtol=1e-6)


def test_sm_stderr_of_a_gaussian_location_matches_the_closed_form():
    # SM for N(mu, sigma^2) with sigma fixed is the sample mean: se = sd(x) / sqrt(n) exactly
    # (H = 1 / sigma^2, c_i = -(x_i - mu) / sigma^4)
    X = np.random.default_rng(2).normal(0.3, 2.0, (400, 1))
    f = est.fit(est.Gaussian(d=1, scale=2.0), X, discrepancy="sm", optimizer="lbfgs")
    assert f.stderr[0] == pytest.approx(X.std() / np.sqrt(400), rel=1e-4)


def test_fit_accepts_lists_and_dataframes_and_reports_progress():
    X = np.random.default_rng(3).normal(0.0, 1.0, (100, 1))
    a = est.fit(est.Gaussian(), X, discrepancy="sm", optimizer="lbfgs")
    b = est.fit(est.Gaussian(), X.tolist(), discrepancy="sm", optimizer="lbfgs")
    np.testing.assert_array_equal(a.theta, b.theta)
    pd = pytest.importorskip("pandas")
    c = est.fit(est.Gaussian(), pd.DataFrame(X, columns=["x"]), discrepancy="sm",
                optimizer="lbfgs")
    np.testing.assert_array_equal(a.theta, c.theta)
    seen = []
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        est.fit(est.Gaussian(), X, discrepancy="sm", steps=220, seed=0, verbose=True,
                callback=lambda t, theta, loss: seen.append((t, theta, loss)))
    assert seen and seen[0][0] == 1 and seen[0][1].shape == (2,)
    assert "[fit]" in buf.getvalue() and "converged" in buf.getvalue()


@pytest.mark.slow
def test_sandwich_intervals_cover_the_truth_95_percent_of_the_time():
    # Gaussian location and scale, SM, n = 500, 200 repetitions (measured 0.955 and 0.925;
    # with the Monte Carlo error of 200 draws, sd 0.015)
    model = est.Gaussian(d=1)
    truth = np.array([0.5, 2.0])
    hit = []
    for r in range(200):
        X = model.sample(500, truth, np.random.default_rng(1000 + r))
        f = est.fit(model, X, discrepancy="sm", optimizer="lbfgs")
        hit.append(np.abs(f.theta - truth) <= 1.96 * f.stderr)
    cover = np.mean(hit, axis=0)
    assert np.all(cover >= 0.9) and np.all(cover <= 0.99), cover


def test_a_smooth_fit_to_contaminated_data_is_not_called_a_kink_without_a_hessian():
    """With stderr=False no Hessian is formed; twice the information tensor is the Hessian
    only for a well-specified model, so under a Dirac contamination it must not be used to
    call a smooth minimiser 'not smooth' (App. F.2's efficient DKSD, z = 5)."""
    model = est.StudentT(nu=5.0, scale=1.0)
    X = model.sample(500, [0.0], np.random.default_rng(0))
    X[:80] = 5.0
    f = est.fit(model, X, discrepancy="dksd", kernel=sc.IMQ(sigma=1.0),
                diffusion=lambda x, t: 1.0 + (x[:, 0] - t[0]) ** 2, optimizer="lbfgs",
                stderr=False)
    assert f.converged, f.message


def test_a_rough_bessel_fit_that_lands_on_a_sample_point_is_not_converged():
    # s = 0.6: the score is unbounded at the location, so the U-statistic KSD runs to -inf next
    # to every sample point; before, Nelder-Mead stopped on a sample point (loss -1.5e10) and
    # reported converged=True
    model = est.SymmetricBessel(s=0.6, scale=1.0)
    X = model.sample(500, [0.0], np.random.default_rng(1))
    f = est.fit(model, X, discrepancy="ksd", kernel=sc.Gaussian(sigma=0.25),
                optimizer="nelder_mead", theta0=[X.mean()], stderr=False)
    assert not f.converged and "unbounded below next to every sample point" in f.message
    smooth = est.SymmetricBessel(s=2.0, scale=1.0)
    assert smooth.singular_params == () and model.singular_params == ("loc",)


def test_a_laplace_location_fit_by_nelder_mead_is_not_called_unidentified():
    # the information tensor comes from score_dtheta, identically 0 in the Laplace location;
    # before, the location-only fit was reported 'theta is not identified' (converged=False)
    X = est.SymmetricBessel(s=1.0).sample(500, [0.0, 1.0], np.random.default_rng(2))
    f = est.fit(est.SymmetricBessel(s=1.0, scale=1.0), X, discrepancy="ksd",
                kernel=sc.Gaussian(sigma=0.25), optimizer="nelder_mead", theta0=[0.5],
                stderr=False)
    assert f.converged and "not identified" not in f.message and abs(f.theta[0]) < 0.15


def test_a_parameter_of_the_wrong_length_names_it_and_the_dimension():
    # before: numpy's "operands could not be broadcast together with remapped shapes"
    with pytest.raises(ValueError, match=r"loc has 2 entries, but the model has 1 .*d=2"):
        est.Gaussian(loc=[0, 1])
    assert est.Gaussian(d=2, loc=[0, 1]).param_names == ("scale",)


def test_nan_data_are_not_pointed_to_an_option_fit_does_not_take():
    # before: "pass nan_policy='omit' to drop them", which fit does not accept
    X = np.random.default_rng(0).standard_normal((50, 1))
    X[3] = np.nan
    with pytest.raises(ValueError, match=r"NaN or inf in 1 of its 50 rows; drop those rows"):
        est.fit(est.Gaussian(), X, discrepancy="sm", optimizer="lbfgs")


class _Returns:
    """A user model whose score returns ``kind`` instead of an array."""

    def __init__(self, kind):
        self.kind = kind

    def score(self, x, theta):
        s = -(x - theta[0])
        return {"list": s.tolist(), "none": None, "tuple": (s,), "scalar": 1.0}[self.kind]


@pytest.mark.parametrize("kind, what", [("list", "a list"), ("none", "None"),
                                        ("tuple", "a tuple"), ("scalar", "a float")])
@pytest.mark.parametrize("call", ["loss_ksd", "loss_dksd", "loss_sm", "fit"])
def test_a_model_score_that_is_no_array_is_a_type_error_naming_it(kind, what, call):
    # before: AttributeError: 'list' object has no attribute 'shape', deep inside the loss
    X = np.random.default_rng(0).standard_normal((60, 2))
    m = _Returns(kind)
    theta = np.array([0.1])
    with pytest.raises(TypeError, match=rf"model\.score\(x, theta\) must return an array of "
                                        rf"x's namespace \(.*\), got {what}"):
        if call == "fit":
            est.fit(m, X, discrepancy="ksd", kernel=sc.IMQ(1.0), theta0=theta, steps=3)
        elif call == "loss_sm":
            est.loss(m, theta, X, discrepancy="sm")
        else:
            est.loss(m, theta, X, discrepancy=call[5:], kernel=sc.IMQ(1.0))


@pytest.mark.parametrize("make, name, value", [
    (lambda: est.StudentT(nu=5.0), "nu", -1.0),
    (lambda: est.StudentT(nu=5.0), "d", 2),
    (lambda: est.SymmetricBessel(s=1.0), "s", 0.1),
    (lambda: est.Gaussian(d=2), "param_names", ("a",)),
])
def test_a_built_models_constants_cannot_be_changed_behind_its_layout(make, name, value):
    # before: StudentT.nu = -1 was taken, and fit said "the information tensor at theta is
    # zero or not finite"; d = 2 then refused the data as having the wrong width
    m = make()
    before = getattr(m, name)
    with pytest.raises(AttributeError, match=rf"{type(m).__name__}\.{name} is fixed when the "
                                             rf"model is built"):
        setattr(m, name, value)
    assert getattr(m, name) == before
    m.start = np.zeros(m.n_params)  # a new attribute is still the user's to set

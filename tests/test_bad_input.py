"""Bad input: every public function raises with a message naming the argument."""

import numpy as np
import pytest

import stein_coreset as sc


@pytest.fixture
def sample():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 2))
    return X, -X


def test_nan_rows_in_points_are_counted(sample):
    X, S = sample
    X = X.copy()
    X[[3, 9, 11], 0] = np.nan
    X[4, 1] = np.inf
    with pytest.raises(ValueError, match=r"X has NaN or inf in 4 of its 50 rows"):
        sc.ksd(X, S)
    with pytest.raises(ValueError, match=r"4 of its 50 rows"):
        sc.compress(X, S, size=5, method="standard")


def test_nan_scores_are_reported(sample):
    X, S = sample
    S = S.copy()
    S[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"S has NaN or inf in 1 of"):
        sc.SteinKernel(sc.IMQ()).matrix(X, S)


def test_nan_policy_omit_drops_rows_and_reports_count(sample):
    X, S = sample
    X = X.copy()
    X[[1, 2], 0] = np.nan
    res = sc.compress(X, S, size=10, method="standard", nan_policy="omit")
    assert res.info["n_dropped"] == 2
    assert not np.isin([1, 2], res.indices).any()
    assert np.isfinite(res.points).all()
    np.testing.assert_array_equal(res.points, X[res.indices])


def test_shape_mismatch_between_points_and_scores(sample):
    X, S = sample
    with pytest.raises(ValueError, match=r"S must have the same shape"):
        sc.ksd(X, S[:-1])
    with pytest.raises(ValueError, match=r"X must be a 2-D array"):
        sc.ksd(X[:, 0], S[:, 0])
    with pytest.raises(ValueError, match=r"weights must have shape \(50,\)"):
        sc.ksd(X, S, weights=np.ones(49) / 49)
    with pytest.raises(ValueError, match=r"same dimension"):
        sc.mmd(X, np.ones((4, 3)))


@pytest.mark.parametrize(
    "M, msg",
    [
        (np.array([[1.0, 2.0], [2.0, 1.0]]), "Cholesky"),
        (np.array([[1.0, 0.5], [0.0, 1.0]]), "not symmetric"),
        (np.eye(3), r"M must have shape \(2, 2\)"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), "M has NaN"),
    ],
)
def test_non_spd_preconditioner_is_rejected(sample, M, msg):
    X, S = sample
    with pytest.raises(ValueError, match=msg):
        sc.SteinKernel(sc.IMQ(), M=M).matrix(X, S)


def test_zero_median_bandwidth_is_an_error():
    X = np.ones((20, 2))
    with pytest.raises(ValueError, match="median pairwise distance of X is zero"):
        sc.median_bandwidth(X)
    with pytest.raises(ValueError, match="median pairwise distance"):
        sc.ksd(X, -X)


def test_bad_kernel_parameters():
    with pytest.raises(ValueError, match="sigma must be positive"):
        sc.IMQ(sigma=0.0)
    with pytest.raises(ValueError, match="beta must lie in"):
        sc.IMQ(beta=0.5)
    with pytest.raises(ValueError, match="nu must be 1.5 or 2.5"):
        sc.Matern(nu=0.5)
    with pytest.raises(TypeError, match="sigma must be a real number"):
        sc.Gaussian(sigma="wide")
    with pytest.raises(TypeError, match="base must be"):
        sc.SteinKernel(base="imq")


def test_mixed_namespaces_are_rejected(sample):
    strict = pytest.importorskip("array_api_strict")
    X, S = sample
    with pytest.raises(TypeError, match="different array libraries"):
        sc.ksd(strict.asarray(X), S)
    with pytest.raises(TypeError, match="different array libraries"):
        sc.compress(X, strict.asarray(S), size=3, method="standard")


def test_mixed_devices_are_rejected(sample):
    strict = pytest.importorskip("array_api_strict")
    X, S = sample
    a = strict.asarray(X, device=strict.Device("device1"))
    b = strict.asarray(S)
    with pytest.raises(TypeError, match="on device"):
        sc.ksd(a, b)


def test_non_array_input_is_a_type_error(sample):
    X, S = sample
    with pytest.raises(TypeError, match="X must be an array"):
        sc.ksd({"x": X}, S)
    with pytest.raises(TypeError, match="X must hold real numbers"):
        sc.ksd(X.astype(str).tolist(), S)


def test_compress_size_and_method_are_validated(sample):
    X, S = sample
    with pytest.raises(ValueError, match=r"size must be between 1 and n = 50, got 0"):
        sc.compress(X, S, size=0, method="standard")
    with pytest.raises(ValueError, match=r"got 51"):
        sc.compress(X, S, size=51, method="standard")
    with pytest.raises(TypeError, match="size must be an integer"):
        sc.compress(X, S, size=2.5, method="standard")
    with pytest.raises(ValueError, match=r"unknown method 'stein'; valid methods: st, skt"):
        sc.compress(X, S, size=5, method="stein")
    with pytest.raises(ValueError, match="nan_policy"):
        sc.compress(X, S, size=5, method="standard", nan_policy="ignore")
    with pytest.raises(TypeError, match="unknown option"):
        sc.compress(X, S, size=5, method="standard", bogus=1)


def test_input_weights_are_refused_by_methods_that_would_ignore_them(sample):
    X, S = sample
    w = np.full(50, 1 / 50)
    for method in sc.available_methods():
        if method in ("rt", "ct"):
            continue
        with pytest.raises(ValueError, match=r"does not take input weights.*'rt', 'ct'"):
            sc.compress(X, S, size=5, method=method, weights=w)


# --- the silent and unclear cases ----------------------------------------------------------------

def test_weighted_rpcholesky_refuses_nan_weights_naming_them(sample):
    from stein_coreset.algorithms import weighted_rpcholesky

    X, S = sample
    K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, S)
    w = np.full(50, 1.0 / 50)
    w[[3, 7]] = np.nan
    with pytest.raises(ValueError, match=r"^w \(the weights\) has NaN or inf in 2 of its 50 "):
        weighted_rpcholesky(K, w, 5, np.random.default_rng(0))
    piv, F = weighted_rpcholesky(K, np.full(50, 1.0 / 50), 5, np.random.default_rng(0))
    assert len(piv) == 5 and F.shape == (50, 5)


@pytest.mark.parametrize("kind", ["datetime", "datetime_tz", "timedelta", "categorical",
                                  "numeric_categorical", "period", "series"])
def test_a_dataframe_with_a_time_or_categorical_column_is_refused_naming_it(sample, kind):
    pd = pytest.importorskip("pandas")
    X, S = sample
    n = X.shape[0]
    col = {
        "datetime": pd.date_range("2020-01-01", periods=n),
        "datetime_tz": pd.date_range("2020-01-01", periods=n, tz="UTC"),
        "timedelta": pd.to_timedelta(np.arange(n), "s"),
        "categorical": pd.Categorical(["a", "b"] * (n // 2)),
        "numeric_categorical": pd.Categorical([1.0, 2.0] * (n // 2)),
        "period": pd.period_range("2020-01-01", periods=n, freq="D"),
        "series": pd.date_range("2020-01-01", periods=n),
    }[kind]
    if kind == "series":
        data, where = pd.Series(col, name="when"), "the Series 'when'"
        S2 = S[:, :1]
    else:
        data, where = pd.DataFrame({"x0": X[:, 0], "when": col}), "column 'when'"
        S2 = S
    with pytest.raises(TypeError, match=rf"^X: {where} has \w+ dtype"):
        sc.ksd(data, S2)
    with pytest.raises(TypeError, match=rf"^X: {where} has \w+ dtype"):
        sc.compress(data, S2, size=5, method="st")
    ok = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1]})
    assert sc.ksd(ok, S) == sc.ksd(X, S)


def test_a_dask_array_is_refused_pointing_to_the_distributed_module(sample):
    da = pytest.importorskip("dask.array")
    X, S = sample
    for call in (lambda: sc.compress(da.from_array(X), S, size=5, method="st"),
                 lambda: sc.compress(X, da.from_array(S), size=5, method="st"),
                 lambda: sc.ksd(da.from_array(X), S)):
        with pytest.raises(TypeError, match=r"^[XS] is a dask Array; .* "
                           r"stein_coreset\.distributed\.compress, or pass [XS]\.compute\(\)"):
            call()


def test_a_scale_preconditioner_that_overflows_names_x_not_m(sample):
    X, S = sample
    for call in (lambda: sc.compress(X * 1e200, S * 1e-200, size=5, method="st"),
                 lambda: sc.ksd(X * 1e200, S * 1e-200)):
        with pytest.raises(ValueError, match=r"^X: the variance of its coordinate 0 overflows "
                           r"\(\|X\| up to 2.\d+e\+200\), so the default kernel's "
                           r"preconditioner M = 'scale' cannot be formed; rescale X"):
            call()


@pytest.mark.parametrize("t, needs", [(10**6, r"t = 1000000 times \(needs 2\^t > 64\)"),
                                      (10**5000, r"t = a 16610-bit number of times"),
                                      (7, r"t = 7 times \(needs 2\^7 = 128\)")],
                         ids=["1e6", "1e5000", "7"])
def test_kt_split_with_a_huge_t_names_t_not_the_digit_limit(sample, t, needs):
    from stein_coreset.algorithms import kt_split

    X, S = sample
    K = sc.SteinKernel(sc.IMQ(1.0)).bind(np.vstack([X, X[:14]]), np.vstack([S, S[:14]]))
    with pytest.raises(ValueError, match=r"^t: indices has 64 entries, too few to halve " + needs):
        kt_split(K, np.arange(64), t)


@pytest.mark.filterwarnings("ignore:More chains:UserWarning")
def test_compress_trace_on_a_zero_draw_trace_says_it_holds_no_draws():
    pm = pytest.importorskip("pymc")
    az = pytest.importorskip("arviz")
    from stein_coreset.integrations.arviz import arviz_major
    from stein_coreset.integrations.pymc import compress_trace

    with pm.Model() as model:
        pm.Normal("mu", 0.0, 1.0)
    groups = {"posterior": {"mu": np.zeros((2, 0))}}
    idata = az.from_dict(groups) if arviz_major() >= 1 else az.from_dict(**groups)
    with pytest.raises(ValueError, match=r"^idata: the trace holds no draws \(posterior: 2 "
                       r"chains x 0 draws\)"):
        compress_trace(idata, model, size=5, method="st")

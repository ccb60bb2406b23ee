"""The threading policy (stein_coreset._threads): one number, from the user or the usable cores."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset._threads import effective_n_threads, usable_cores


def test_effective_n_threads_default_is_usable_cores():
    assert effective_n_threads() == usable_cores() >= 1
    assert effective_n_threads(-1) == usable_cores()
    assert effective_n_threads(3) == 3


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True])
def test_effective_n_threads_rejects_bad_values(bad):
    with pytest.raises((TypeError, ValueError), match="n_threads"):
        effective_n_threads(bad)


def test_compress_reports_n_threads_and_rank_from_tau():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 2))
    res = sc.compress(X, -X, size=16, method="lsr", tau=0.4, n_threads=1, seed=0)
    assert res.info["n_threads"] == 1
    assert res.info["rank_from_tau"] == 11  # ceil(400^0.4) = ceil(10.98)
    with pytest.raises(ValueError, match="tau"):
        sc.compress(X, -X, size=16, method="st", tau=0.4)
    with pytest.raises(ValueError, match="tau"):
        sc.compress(X, -X, size=16, method="lsr", tau=1.5)

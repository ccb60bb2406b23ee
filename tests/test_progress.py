"""progress=True says what runs before a long stage starts and when it ends (issue 26)."""

import numpy as np

import stein_coreset as sc


def test_progress_announces_the_method_before_it_runs_and_its_time_after(capsys):
    X = np.random.default_rng(0).normal(size=(500, 2))
    sc.compress(X, -X, size=16, method="skt", progress=True, seed=0)
    err = capsys.readouterr().err
    assert "skt (Stein kernel thinning" in err and "n = 500" in err
    assert "skt done in" in err


def test_no_progress_prints_nothing(capsys):
    X = np.random.default_rng(0).normal(size=(200, 2))
    sc.compress(X, -X, size=8, method="st")
    assert capsys.readouterr().err == ""

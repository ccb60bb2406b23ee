"""CLI file safety (issue 15): atomic writes, no overwriting of inputs, strict CSV reading."""

import os

import numpy as np
import pytest

from stein_coreset import _io


def test_write_atomic_leaves_nothing_behind_on_interrupt(tmp_path):
    target = tmp_path / "out.npz"
    np.savez(target, a=np.arange(3))

    def writer(f):
        f.write(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _io.write_atomic(target, writer)
    assert sorted(os.listdir(tmp_path)) == ["out.npz"]
    np.testing.assert_array_equal(np.load(target)["a"], np.arange(3))


def test_write_atomic_replaces_whole_file(tmp_path):
    path = _io.write_atomic(_io.savez_path(tmp_path / "res"),
                            lambda f: np.savez(f, idx=np.arange(4)))
    assert path.endswith("res.npz") and os.listdir(tmp_path) == ["res.npz"]
    np.testing.assert_array_equal(np.load(path)["idx"], np.arange(4))


@pytest.mark.parametrize("out", ["chain", "chain.npz", "./sub/../chain.npz", "link.npz"])
def test_refuse_overwrite_input_catches_the_same_file(tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    np.savez("chain.npz", X=np.ones((4, 2)), S=-np.ones((4, 2)))
    os.link("chain.npz", "link.npz")
    with pytest.raises(ValueError, match=r"would overwrite the input file"):
        _io.refuse_overwrite_input(out, ["chain.npz:X", None])
    assert _io.refuse_overwrite_input("coreset", ["chain.npz"]) == "coreset.npz"


def test_one_row_csv_is_one_point(tmp_path):
    p = tmp_path / "p.csv"
    p.write_text("1,2,3\n")
    assert _io.load_points(str(p)).shape == (1, 3)
    p.write_text("a,b\n1,2\n3,4\n")
    np.testing.assert_array_equal(_io.load_points(str(p)), [[1, 2], [3, 4]])
    p.write_text("1\n2\n3\n")
    assert _io.load_points(str(p)).shape == (3, 1)


@pytest.mark.parametrize("text, match", [
    ("1;2;3\n4;5;6\n", r"line 1: cells are separated by ';'"),
    ("1,2\n3,abc\n", r"line 2, column 2: the cell 'abc' is not a number"),
    ("1,2\n3,4,5\n", r"line 2: 3 cells, but earlier lines have 2"),
])
def test_bad_csv_names_file_and_line(tmp_path, text, match):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(ValueError, match=r"POINTS: .*bad\.csv, " + match):
        _io.load_points(str(p))


def test_csv_missing_cells_are_nan_for_nan_policy(tmp_path):
    p = tmp_path / "na.csv"
    p.write_text("a,b\n1,2\n3,\nNA,4\n5,nan\n6,7\n")
    A = _io.load_points(str(p))
    assert A.shape == (5, 2)
    np.testing.assert_array_equal(np.isnan(A).any(axis=1), [False, True, True, True, False])
    table, names = _io.load_table(str(p))
    assert names == ["a", "b"]


def test_csv_reads_the_same_with_and_without_pandas(tmp_path, monkeypatch):
    import sys

    p = tmp_path / "t.csv"
    p.write_text("# comment\nx,y,z\n1,2,3\n4,,6\n7,8,9\n")
    with_pd = _io.read_csv_table(str(p))
    monkeypatch.setitem(sys.modules, "pandas", None)
    without = _io.read_csv_table(str(p))
    np.testing.assert_array_equal(with_pd[0], without[0])
    assert with_pd[1] == without[1] == ["x", "y", "z"]


def test_out_with_another_extension_is_refused_with_the_npz_name():
    with pytest.raises(ValueError, match=r"--out X\.npy: the coreset is an \.npz archive.*X\.npz"):
        _io.refuse_overwrite_input("X.npy", ["X.npy"])

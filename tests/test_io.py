"""CLI file safety: atomic writes, no overwriting of inputs, strict CSV reading."""

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


# --- bounded input readers ---------------------------------------------------------------------

def _cli(argv, cwd, timeout=60):
    """``python -m stein_coreset ARGV`` in a subprocess with a timeout and (POSIX) 2 GiB of
    address space: a reader that blocks (a FIFO) or never ends (/dev/zero) fails the test
    instead of hanging the suite or filling the machine's memory."""
    import subprocess
    import sys

    def limit():  # pragma: no cover - runs in the child
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        except (ImportError, ValueError, OSError):
            pass

    proc = subprocess.run([sys.executable, "-m", "stein_coreset", *map(str, argv)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit if os.name == "posix" else None)
    return proc.returncode, proc.stderr.strip()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize("where", ["POINTS", "--scores"])
def test_a_fifo_input_is_refused_before_open_naming_the_file(tmp_path, where):
    os.mkfifo(tmp_path / "pipe.npy")
    np.save(tmp_path / "X.npy", np.ones((10, 2)))
    argv = (["compress", "pipe.npy", "--scores", "X.npy"] if where == "POINTS"
            else ["compress", "X.npy", "--scores", "pipe.npy"])
    rc, err = _cli(argv + ["--method", "st", "--size", 3, "--out", "-"], tmp_path, timeout=30)
    assert rc == 2
    assert err.count("\n") == 0 and "pipe.npy is a FIFO (named pipe), not a regular file" in err
    assert ("POINTS" if where == "POINTS" else "SCORES") in err


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize("name", ["zero.csv", "zero.npy", "zero.npz"])
def test_a_symlink_to_dev_zero_is_refused_naming_the_device(tmp_path, name):
    os.symlink("/dev/zero", tmp_path / name)
    rc, err = _cli(["compress", name, "--method", "st", "--size", 3, "--out", "-"], tmp_path,
                   timeout=30)
    assert rc == 2 and err.count("\n") == 0
    assert f"POINTS: {name} (a symbolic link to /dev/zero) is a character device" in err


def test_check_input_file_refuses_devices_fifos_and_directories(tmp_path):
    with pytest.raises(IsADirectoryError, match=r"POINTS: .* is a directory"):
        _io.check_input_file(str(tmp_path), "POINTS")
    with pytest.raises(FileNotFoundError, match=r"SCORES: file not found: .*nope\.npy"):
        _io.check_input_file(str(tmp_path / "nope.npy"), "SCORES")
    if os.path.exists("/dev/null"):
        with pytest.raises(ValueError, match=r"X: /dev/null is a character device"):
            _io.load_points("/dev/null", "X")


def test_a_csv_larger_than_memory_is_refused_from_its_size_before_reading(tmp_path, monkeypatch):
    from stein_coreset import _validation

    p = tmp_path / "big.csv"
    p.write_text("1,2\n3,4\n")
    assert _io.load_points(str(p)).shape == (2, 2)
    monkeypatch.setattr(_validation, "physical_memory", lambda: 20)  # 20 bytes of memory
    with pytest.raises(ValueError, match=r"^POINTS: reading .*big\.csv \(8 bytes of text as a "
                       r"float64 table\) would need .* GiB, more than this machine's"):
        _io.load_points(str(p))


def test_an_npy_whose_header_exceeds_memory_is_refused_before_reading(tmp_path, monkeypatch):
    from stein_coreset import _validation

    p = tmp_path / "huge.npy"
    np.save(p, np.ones((1000, 4), dtype=np.float32))  # 16 kB on disk, 32 kB as float64
    assert _io.load_points(str(p)).shape == (1000, 4)
    monkeypatch.setattr(_validation, "physical_memory", lambda: 20_000)
    with pytest.raises(ValueError, match=r"^SCORES: reading .*huge\.npy .* would need .* GiB, "
                       r"more than this machine's"):
        _io.load_points(str(p), "SCORES")
    np.savez(tmp_path / "huge.npz", X=np.ones((1000, 4)))
    with pytest.raises(ValueError, match=r"^POINTS: reading .*huge\.npz "):
        _io.load_points(str(tmp_path / "huge.npz"))


def test_a_bad_npz_member_names_the_file_and_member(tmp_path):
    import io
    import zipfile

    buf = io.BytesIO()
    np.save(buf, np.ones((4, 2)))
    raw = buf.getvalue()
    with zipfile.ZipFile(tmp_path / "m.npz", "w") as z:
        z.writestr("X.npy", b"\x93NUMPX" + raw[6:])
        z.writestr("S.npy", raw[:20])
    with pytest.raises(ValueError, match=r"POINTS: .*m\.npz:X is not a valid NumPy array \(the "
                       "magic string"):
        _io.load_points(str(tmp_path / "m.npz"))
    with pytest.raises(ValueError, match=r"SCORES: .*m\.npz:S is not a valid NumPy array \(EOF"):
        _io.load_points(str(tmp_path / "m.npz") + ":S", "SCORES")


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="no /proc/self/mem")
def test_an_unreadable_input_names_the_file(tmp_path):
    os.symlink("/proc/self/mem", tmp_path / "mem.npy")
    with pytest.raises(ValueError, match=r"--precond: cannot read .*mem\.npy: Input/output"):
        _io.load_points(str(tmp_path / "mem.npy"), "--precond")


def test_an_out_name_longer_than_the_file_system_allows_is_refused(tmp_path):
    _io.check_out_name(str(tmp_path / ("a" * 200 + ".npz")))
    with pytest.raises(ValueError, match=r"--out: the file name a+\.\.\. is 304 bytes long"):
        _io.check_out_name(str(tmp_path / ("a" * 300 + ".npz")))


# ---- CSV encodings, trailing separators, headers ----------------------------------------------

_TABLE = "a,b\n1.5,2\n3,4\n-1,0.25\n"
_VALUES = [[1.5, 2.0], [3.0, 4.0], [-1.0, 0.25]]


@pytest.mark.parametrize("kind, needle", [
    ("gzip", r"gz\.csv is gzip-compressed, not a CSV text file; decompress it first"),
    ("bz2", r"gz\.csv is bzip2-compressed"),
    ("npz", r"gz\.csv is a zip archive \(an \.npz file\?\)"),
    ("latin1", r"gz\.csv, line 1: the byte 0xe9 is not UTF-8 text"),
    ("binary", r"gz\.csv, line 1: the byte 0x80 is not UTF-8 text"),
    ("utf16-no-bom", r"gz\.csv, line 1: a NUL character: a binary file, or UTF-16 text without"),
])
def test_a_csv_that_is_not_utf8_text_names_the_file(tmp_path, kind, needle):
    # before: "POINTS: 'utf-8' codec can't decode byte 0x8b in position 1" (no file named)
    import bz2
    import gzip
    import io

    p = tmp_path / "gz.csv"
    if kind == "gzip":
        p.write_bytes(gzip.compress(_TABLE.encode()))
    elif kind == "bz2":
        p.write_bytes(bz2.compress(_TABLE.encode()))
    elif kind == "npz":
        buf = io.BytesIO()
        np.savez(buf, X=np.ones((3, 2)))
        p.write_bytes(buf.getvalue())
    elif kind == "latin1":
        p.write_bytes("é,b\n1,2\n".encode("latin-1"))
    elif kind == "binary":
        p.write_bytes(bytes(range(128, 256)) * 4)
    else:
        p.write_bytes(_TABLE.encode("utf-16-le"))
    with pytest.raises(ValueError, match="POINTS: .*" + needle):
        _io.load_points(str(p))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-8-sig"])
def test_a_csv_with_a_byte_order_mark_is_read_in_its_encoding(tmp_path, encoding):
    p = tmp_path / "t.csv"
    p.write_bytes(_TABLE.encode(encoding))
    table, names = _io.load_table(str(p))
    np.testing.assert_array_equal(table, _VALUES)
    assert names == ["a", "b"]


@pytest.mark.parametrize("text", [
    "1.5,2,\n3,4,\n-1,0.25,\n",          # a comma ends every line
    "a,b,\n1.5,2,\n3,4,\n-1,0.25,\n",    # the header's too
    "a,b\n1.5,2,\n3,4,\n-1,0.25,\n",     # the data lines only
])
def test_a_trailing_comma_on_every_line_is_a_separator_not_a_column(tmp_path, monkeypatch, text):
    # before: an extra all-NaN column, reported as a shape mismatch with the scores
    p = tmp_path / "t.csv"
    p.write_text(text)
    with_pd = _io.load_table(str(p))
    monkeypatch.setitem(__import__("sys").modules, "pandas", None)
    without = _io.load_table(str(p))
    for table, names in (with_pd, without):
        np.testing.assert_array_equal(table, _VALUES)
        assert names in (None, ["a", "b"])


def test_a_last_column_the_header_names_stays_a_column_of_missing_values(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("a,b,c\n1,2,\n3,4,\n")
    table, names = _io.load_table(str(p))
    assert names == ["a", "b", "c"] and table.shape == (2, 3) and np.isnan(table[:, 2]).all()


def test_a_csv_column_named_twice_is_refused_when_selected_by_name(tmp_path, capsys):
    # before: --x-columns x silently took the first of two columns named x
    from stein_coreset import cli

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 2))
    rows = "\n".join(f"{x:.6f},{y:.6f},{-x:.6f},{-y:.6f}" for x, y in X)
    p = tmp_path / "dup.csv"
    p.write_text("x,x,s1,s2\n" + rows + "\n")
    rc = cli.main(["compress", str(p), "--x-columns", "x", "--score-columns", "s1,s2",
                   "--method", "st", "--size", "5", "--out", "-"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "--x-columns: the header names 2 columns 'x' (columns 0, 1, 0-based)" in err
    rc = cli.main(["compress", str(p), "--x-columns", "0:2", "--score-columns", "s1,s2",
                   "--method", "st", "--size", "5", "--out", "-"])
    assert rc == 0


@pytest.mark.parametrize("header, first", [(",a,b", 0), ('"","a","b"', 1)])
def test_a_row_index_written_as_the_first_column_is_not_read_as_a_coordinate(tmp_path, header,
                                                                             first):
    # before: pandas' to_csv (",a,b" over 0, 1, ...) and R's write.csv ('"","a","b"' over
    # "1", "2", ...) files were read with the row number as one more coordinate of every point
    p = tmp_path / "t.csv"
    rows = [f'{first + i if header.startswith(",") else chr(34) + str(first + i) + chr(34)},'
            f"{a},{b}" for i, (a, b) in enumerate(_VALUES)]
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    with pytest.raises(ValueError, match=r"t\.csv: its first column is a row index \(unnamed, "
                                         rf"holding {first}, {first + 1}, \.\.\."):
        _io.load_points(str(p))
    table, names = _io.load_table(str(p))  # columns picked by name: the index is not read
    assert names == ["", "a", "b"]
    np.testing.assert_array_equal(table[:, 1:], _VALUES)


def test_quoted_header_names_are_unquoted(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text('"a","b"\n1.5,2\n3,4\n-1,0.25\n')
    table, names = _io.load_table(str(p))
    assert names == ["a", "b"]
    np.testing.assert_array_equal(table, _VALUES)

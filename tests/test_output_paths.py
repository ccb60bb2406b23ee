"""The one output path (stein_coreset._output): every public function and command that writes
a file refuses an existing file without force, never replaces an input, writes atomically, and
writes a device or pipe as it is."""

import os
import subprocess
import sys

import numpy as np
import pytest

from stein_coreset import _io, cli


def _chains(tmp_path, n=200):
    rng = np.random.default_rng(0)
    paths = []
    for c in range(2):
        X = rng.standard_normal((n, 2)) + c
        p = tmp_path / f"c{c}.npz"
        np.savez(p, X=X, S=-X)
        paths.append(str(p))
    return paths


def _bytes(paths):
    return [open(p, "rb").read() for p in paths]


@pytest.mark.parametrize("out", ["c0.npz", "c1", "./c0.npz", "link.npz"])
def test_run_cli_never_writes_over_an_input_chain(tmp_path, monkeypatch, out):
    # before: run_cli(['c0.npz', 'c1.npz'], ..., out='c0.npz') replaced c0.npz by the coreset,
    # and out='c1' replaced c1.npz (np.savez appends .npz)
    pytest.importorskip("dask")
    from stein_coreset.distributed import run_cli

    monkeypatch.chdir(tmp_path)
    paths = _chains(tmp_path)
    os.link("c0.npz", "link.npz")
    before = _bytes(paths)
    with pytest.raises(ValueError, match="would overwrite the input file"):
        run_cli(["c0.npz", "c1.npz"], size=8, method="st", seed=0, out=out)
    with pytest.raises(ValueError, match="would overwrite the input file"):
        run_cli(["c0.npz", "c1.npz"], size=8, method="st", seed=0, out=out, force=True)
    assert _bytes(paths) == before


def test_run_cli_replaces_an_existing_output_only_with_force(tmp_path):
    pytest.importorskip("dask")
    from stein_coreset.distributed import run_cli

    paths = _chains(tmp_path)
    out = tmp_path / "coreset.npz"
    out.write_bytes(b"keep me")
    with pytest.raises(FileExistsError, match=r"out: .*coreset.npz exists; pass force=True"):
        run_cli(paths, size=8, method="st", seed=0, out=str(out))
    assert out.read_bytes() == b"keep me"
    res = run_cli(paths, size=8, method="st", seed=0, out=str(out), force=True)
    with np.load(out) as z:
        np.testing.assert_array_equal(z["indices"], res.indices)
    assert sorted(os.listdir(tmp_path)) == ["c0.npz", "c1.npz", "coreset.npz"]


def test_demo_save_chain_refuses_an_existing_file_without_force(tmp_path, capsys):
    # before: --save-chain replaced the file, with a plain np.savez (not atomic)
    out = tmp_path / "chain.npz"
    out.write_bytes(b"keep me")
    argv = ["demo", "--target", "gmm", "--n", "64", "--methods", "st", "--save-chain", str(out)]
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and "--save-chain" in err and "exists" in err and "--force" in err
    assert out.read_bytes() == b"keep me"
    assert cli.main([*argv, "--force"]) == 0
    with np.load(out) as z:
        assert z["X"].shape == (64, 2)
    assert os.listdir(tmp_path) == ["chain.npz"]


def test_demo_save_chain_is_written_atomically(tmp_path, monkeypatch):
    from stein_coreset import demo

    out = tmp_path / "chain.npz"
    out.write_bytes(b"keep me")

    def interrupted(f, **arrays):
        f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(demo.np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        demo.run_demo(target="gmm", n=64, methods="st", save_chain=str(out), force=True)
    assert out.read_bytes() == b"keep me" and os.listdir(tmp_path) == ["chain.npz"]


@pytest.mark.skipif(not os.path.exists("/dev/stdout"), reason="no /dev/stdout")
def test_out_dev_stdout_writes_the_npz_to_stdout_without_a_suffix(tmp_path):
    # before: --out /dev/stdout created the file /dev/stdout.npz
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 2))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "S.npy", -X)
    with open(tmp_path / "captured", "wb") as f:
        p = subprocess.run(
            [sys.executable, "-m", "stein_coreset", "compress", str(tmp_path / "X.npy"),
             "--scores", str(tmp_path / "S.npy"), "--method", "st", "--size", "8",
             "--seed", "0", "--out", "/dev/stdout"],
            stdout=f, stderr=subprocess.PIPE, text=True, timeout=120, cwd=tmp_path,
        )
    assert p.returncode == 0, p.stderr
    assert "st: 8 of 100 points" in p.stderr  # the summary moves to stderr
    with np.load(tmp_path / "captured") as z:
        assert z["indices"].size >= 1
    assert not os.path.exists("/dev/stdout.npz")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_out_dev_full_is_a_one_line_error_naming_it(tmp_path, capsys):
    # before: --out /dev/full created /dev/full.npz
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 2))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "S.npy", -X)
    rc = cli.main(["compress", str(tmp_path / "X.npy"), "--scores", str(tmp_path / "S.npy"),
                   "--method", "st", "--size", "8", "--out", "/dev/full"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "--out: cannot write /dev/full" in err[0] and "No space left" in err[0]
    assert not os.path.exists("/dev/full.npz")


def test_check_output_names_the_file_written_and_keeps_a_symlink(tmp_path):
    from stein_coreset import _output

    target = tmp_path / "real.npz"
    target.write_bytes(b"old")
    link = tmp_path / "link.npz"
    link.symlink_to(target)
    out = _output.check_output(str(link), force=True)
    assert out.path == str(target) and not out.stream
    _output.write_output(out, lambda f: f.write(b"new"))
    assert link.is_symlink() and target.read_bytes() == b"new"
    assert _output.check_output("-") is None and _output.check_output(None) is None
    with pytest.raises(TypeError, match="out must be a file path"):
        _output.check_output(3, what="out")


def test_a_file_that_appears_during_the_work_is_not_replaced_without_force(tmp_path):
    from stein_coreset import _output

    out = _output.check_output(str(tmp_path / "c.npz"))  # new: passes the check
    (tmp_path / "c.npz").write_bytes(b"written meanwhile")
    with pytest.raises(FileExistsError, match="appeared while the result was computed"):
        _output.write_output(out, lambda f: f.write(b"result"))
    assert (tmp_path / "c.npz").read_bytes() == b"written meanwhile"
    assert os.listdir(tmp_path) == ["c.npz"]  # no temporary file left


def test_io_reexports_the_one_output_path():
    from stein_coreset import _output

    assert _io.check_output is _output.check_output
    assert _io.write_atomic is _output.write_atomic
    assert _io.refuse_overwrite_input is _output.refuse_overwrite_input


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE semantics")
def test_a_file_size_limit_is_a_one_line_error_naming_the_output_and_leaves_nothing(tmp_path):
    # before: "stein-coreset: error: [Errno 27] File too large", no file named
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 2))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "S.npy", -X)
    (tmp_path / "out").mkdir()
    code = (
        "import resource, sys\n"
        "from stein_coreset import cli\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (3000, resource.RLIM_INFINITY))\n"
        f"sys.exit(cli.main(['compress', {str(tmp_path / 'X.npy')!r}, '--scores', "
        f"{str(tmp_path / 'S.npy')!r}, '--method', 'st', '--size', '2000', '--out', "
        f"{str(tmp_path / 'out' / 'c.npz')!r}]))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip() == (f"stein-coreset: error: --out: cannot write "
                                f"{tmp_path / 'out' / 'c.npz'}: File too large")
    assert os.listdir(tmp_path / "out") == []

"""The ``stein-coreset`` command, through ``main([...])`` and one real ``python -m`` process."""

import dataclasses
import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import cli
from stein_coreset.compress import METHODS, available_methods

# the module (the package's ``compress`` attribute is the function)
compress_mod = importlib.import_module("stein_coreset.compress")


@pytest.fixture
def sample(tmp_path):
    rng = np.random.default_rng(0)
    X = 0.7 + 1.5 * rng.standard_normal((50, 2))
    S = -X
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "S.npy", S)
    return tmp_path, X, S


def _run(argv, capsys):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_error(rc, err):
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("stein-coreset: error: ")
    assert "Traceback" not in err
    return lines[0]


def _load(path):
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# --- compress: reading, writing ---------------------------------------------------------------


def test_compress_npy_writes_indices_weights_points_and_info(sample, capsys):
    d, X, S = sample
    out = d / "c.npz"
    rc, stdout, _ = _run(
        ["compress", d / "X.npy", "--scores", d / "S.npy", "--method", "standard", "--size", 10,
         "--out", out],
        capsys,
    )
    assert rc == 0
    assert "standard: 10 of 50 points" in stdout and str(out) in stdout
    z = _load(out)
    assert z["indices"].shape == (10,) and len(set(z["indices"].tolist())) == 10
    np.testing.assert_allclose(z["weights"].sum(), 1.0)
    np.testing.assert_array_equal(z["points"], X[z["indices"]])
    info = json.loads(str(z["info"]))
    assert info["method"] == "standard" and info["n"] == 50 and info["kind"] == "equal"
    assert np.isfinite(float(z["ksd"])) and info["ksd"] == pytest.approx(float(z["ksd"]))


def test_compress_reads_named_arrays_from_one_npz_and_csv_with_header(sample, capsys):
    d, X, S = sample
    np.savez(d / "chain.npz", points=X, scores=S)
    rc, _, _ = _run(
        [
            "compress",
            d / "chain.npz",
            "--method",
            "iid",
            "--size",
            5,
            "--seed",
            1,
            "--out",
            d / "a.npz",
        ],
        capsys,
    )
    assert rc == 0
    info = json.loads(str(_load(d / "a.npz")["info"]))
    assert info["scores_file"].endswith("chain.npz:scores")  # scores found in the same file
    # FILE.npz:NAME picks an array; CSV with a header line
    np.savez(d / "other.npz", a=X, b=S)
    with open(d / "S.csv", "w") as f:
        f.write("s1,s2\n")
        np.savetxt(f, S, delimiter=",")
    rc, _, _ = _run(
        [
            "compress",
            f"{d / 'other.npz'}:a",
            "--scores",
            d / "S.csv",
            "--method",
            "iid",
            "--size",
            5,
            "--seed",
            1,
            "--out",
            d / "b.npz",
        ],
        capsys,
    )
    assert rc == 0
    a, b = _load(d / "a.npz"), _load(d / "b.npz")
    np.testing.assert_array_equal(a["indices"], b["indices"])  # same data, same seed
    np.testing.assert_allclose(a["ksd"], b["ksd"], rtol=1e-12)


def test_compress_nan_policy_omit_drops_the_bad_rows_and_reports_them(sample, capsys):
    d, X, S = sample
    X = X.copy()
    X[[3, 7]] = np.nan
    S = S.copy()
    S[11, 0] = np.inf
    np.save(d / "Xn.npy", X)
    np.save(d / "Sn.npy", S)
    rc, stdout, _ = _run(
        [
            "compress",
            d / "Xn.npy",
            "--scores",
            d / "Sn.npy",
            "--method",
            "iid",
            "--size",
            47,
            "--nan-policy",
            "omit",
            "--seed",
            0,
            "--out",
            d / "o.npz",
        ],
        capsys,
    )
    assert rc == 0 and "dropped 3 rows" in stdout
    z = _load(d / "o.npz")
    assert not set(z["indices"].tolist()) & {3, 7, 11}
    assert np.all(np.isfinite(z["points"]))
    assert json.loads(str(z["info"]))["n_dropped"] == 3


def test_compress_appends_npz_suffix_and_accepts_options_and_progress(sample, capsys):
    d, X, S = sample
    rc, _, _ = _run(
        [
            "compress",
            d / "X.npy",
            "--method",
            "standard",
            "--size",
            4,
            "--out",
            d / "plain",
            "--progress",
        ],
        capsys,
    )
    assert rc == 0 and os.path.exists(d / "plain.npz")
    assert np.isnan(_load(d / "plain.npz")["ksd"])  # no scores, no KSD
    rc, _, err = _run(
        [
            "compress",
            d / "X.npy",
            "--method",
            "standard",
            "--size",
            4,
            "--out",
            d / "p.npz",
            "--option",
            "bogus=1",
        ],
        capsys,
    )
    assert "bogus" in _one_line_error(rc, err)  # unknown options are refused by compress


# --- compress: error paths, one line and exit code 2 ----------------------------------------


def test_missing_file_is_one_line_exit_2(sample, capsys):
    d, _, _ = sample
    rc, _, err = _run(
        ["compress", d / "nope.npy", "--scores", d / "S.npy", "--method", "standard", "--size", 3],
        capsys,
    )
    line = _one_line_error(rc, err)
    assert "POINTS: file not found" in line and "nope.npy" in line


def test_shape_mismatch_is_one_line_exit_2(sample, capsys):
    d, X, S = sample
    np.save(d / "S_short.npy", S[:40])
    rc, _, err = _run(
        ["compress", d / "X.npy", "--scores", d / "S_short.npy", "--method", "standard",
         "--size", 3],
        capsys,
    )
    line = _one_line_error(rc, err)
    assert "shape mismatch" in line and "(40, 2)" in line and "(50, 2)" in line


def test_nan_rows_are_counted_in_a_one_line_error(sample, capsys):
    d, X, S = sample
    X = X.copy()
    X[[0, 5, 9], 1] = np.nan
    np.save(d / "Xn.npy", X)
    rc, _, err = _run(
        ["compress", d / "Xn.npy", "--scores", d / "S.npy", "--method", "standard", "--size", 3],
        capsys,
    )
    line = _one_line_error(rc, err)
    assert "3 of the 50 rows" in line and "--nan-policy omit" in line


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--method", "nosuch", "--size", 3], "unknown method 'nosuch'"),
        (["--method", "standard", "--size", 0], "size"),
        (["--method", "standard", "--size", 51], "size"),
    ],
)
def test_bad_method_or_size_is_one_line_exit_2(sample, capsys, argv, needle):
    d, _, _ = sample
    rc, _, err = _run(["compress", d / "X.npy", "--scores", d / "S.npy", *argv], capsys)
    assert needle in _one_line_error(rc, err)


def test_unsupported_file_type_and_ambiguous_npz_are_one_line_errors(sample, capsys):
    d, X, S = sample
    (d / "X.txt").write_text("1 2\n")
    rc, _, err = _run(["compress", d / "X.txt", "--method", "standard", "--size", 1], capsys)
    assert "unsupported file type '.txt'" in _one_line_error(rc, err)
    np.savez(d / "two.npz", a=X, b=S)
    rc, _, err = _run(["compress", d / "two.npz", "--method", "standard", "--size", 1], capsys)
    assert "pick one with" in _one_line_error(rc, err)
    rc, _, err = _run(
        ["compress", f"{d / 'two.npz'}:c", "--method", "standard", "--size", 1], capsys
    )
    assert "no array 'c'" in _one_line_error(rc, err)


def test_debiased_method_without_scores_is_refused(sample, capsys):
    d, _, _ = sample
    rc, _, err = _run(["compress", d / "X.npy", "--method", "st", "--size", 3], capsys)
    assert "needs the scores" in _one_line_error(rc, err)  # compress's check, one line


def test_debug_shows_the_traceback_before_or_after_the_command(sample):
    d, _, _ = sample
    args = ["compress", str(d / "nope.npy"), "--method", "standard", "--size", "3"]
    with pytest.raises(cli.CLIError, match="file not found"):
        cli.main(["--debug", *args])
    with pytest.raises(cli.CLIError, match="file not found"):
        cli.main([*args, "--debug"])


def test_python_dash_m_process_exits_2_with_one_line_and_no_traceback(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stein_coreset",
            "compress",
            "missing.npy",
            "--method",
            "standard",
            "--size",
            "3",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "stein-coreset: error: POINTS: file not found: missing.npy"
    ]
    assert proc.stdout == ""


# --- demo -----------------------------------------------------------------------------------


def test_demo_gmm_prints_a_row_per_available_method(capsys):
    rc, out, _ = _run(["demo", "--target", "gmm", "--n", 400, "--reference", 300], capsys)
    assert rc == 0
    assert "Gaussian mixture" in out and "Lower is better" in out
    assert out.startswith("demo: simulating")
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert "(input)" in rows
    for m in available_methods():
        assert m in rows, m
        assert rows[m][1] == ("debiased" if METHODS[m].debiased else "baseline")
        assert rows[m][2] in ("equal", "simplex", "constant")
        ksd, energy = float(rows[m][4]), float(rows[m][5])
        assert ksd >= 0 and energy >= 0


def test_demo_keeps_working_with_any_subset_and_reports_a_broken_method(capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    only = {
        "standard": METHODS["standard"],
        "iid": dataclasses.replace(METHODS["iid"], run=broken),
    }
    monkeypatch.setattr(compress_mod, "METHODS", only)
    rc, out, err = _run(
        ["demo", "--target", "gmm", "--n", 200, "--reference", 100, "--size", 8], capsys
    )
    assert rc == 1  # a failed method is reported, the others still run
    assert "standard    baseline  equal" in out and "iid         failed: RuntimeError: boom" in out
    assert "method(s) failed: iid" in err


def test_demo_goodwin_runs_at_small_size(capsys):
    rc, out, _ = _run(
        ["demo", "--n", 150, "--reference", 60, "--methods", "standard", "--size", 10], capsys
    )
    assert rc == 0
    assert "Goodwin" in out and "burn-in" in out
    assert any(line.startswith("standard") for line in out.splitlines())


def test_demo_rejects_unknown_method_and_bad_size(capsys):
    rc, _, err = _run(["demo", "--methods", "standard,nosuch"], capsys)
    assert "unknown method 'nosuch'" in _one_line_error(rc, err)
    rc, _, err = _run(["demo", "--target", "gmm", "--n", 100, "--size", 101], capsys)
    assert "--size" in _one_line_error(rc, err)
    rc, _, err = _run(["demo", "--target", "gmm", "--n", 100, "--size", 0], capsys)
    assert "--size" in _one_line_error(rc, err)  # 0 is not "the default"
    rc, _, err = _run(["demo", "--save-chain", "/nonexistent-dir/c.npz"], capsys)
    assert "--save-chain: directory does not exist" in _one_line_error(rc, err)


def test_demo_plot_writes_a_png_or_says_matplotlib_is_missing(tmp_path, capsys):
    png = tmp_path / "demo.png"
    argv = [
        "demo",
        "--target",
        "gmm",
        "--n",
        200,
        "--reference",
        100,
        "--size",
        8,
        "--methods",
        "standard,iid",
        "--plot",
        png,
    ]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        rc, _, err = _run(argv, capsys)
        assert "pip install -r requirements/plot.txt" in _one_line_error(rc, err)
    else:
        rc, out, _ = _run(argv, capsys)
        assert rc == 0 and f"wrote {png}" in out
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_fails_fast_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    monkeypatch.setattr(cli, "demo_chain", lambda *a, **k: pytest.fail("simulated before check"))
    rc, _, err = _run(["demo", "--plot", tmp_path / "x.png"], capsys)
    line = _one_line_error(rc, err)
    assert "--plot needs matplotlib" in line and "requirements/plot.txt" in line


def test_methods_lists_every_name(capsys):
    rc, out, _ = _run(["methods"], capsys)
    assert rc == 0
    assert [line.split()[0] for line in out.splitlines()] == available_methods()


def test_demo_saved_chain_compresses_to_the_demo_ksd_from_the_command_line(tmp_path, capsys):
    chain = tmp_path / "chain.npz"
    rc, out, _ = _run(
        [
            "demo",
            "--target",
            "gmm",
            "--n",
            196,
            "--reference",
            50,
            "--methods",
            "standard",
            "--save-chain",
            chain,
        ],
        capsys,
    )
    assert rc == 0 and f"saved the chain to {chain}" in out
    demo_ksd = float(next(ln.split()[4] for ln in out.splitlines() if ln.startswith("standard")))
    z = _load(chain)
    assert z["X"].shape == z["S"].shape == (196, 2) and z["reference"].shape == (50, 2)
    rc, _, _ = _run(
        ["compress", chain, "--method", "standard", "--size", 14, "--out", tmp_path / "c.npz"],
        capsys,
    )
    assert rc == 0
    c = _load(tmp_path / "c.npz")
    assert json.loads(str(c["info"]))["scores_file"].endswith("chain.npz:S")  # found by name
    # same points, same default kernel (median bandwidth of X): the demo's KSD
    assert float(c["ksd"]) == pytest.approx(demo_ksd, rel=1e-3)


def test_compress_bandwidth_and_precond_set_the_stein_kernel_of_the_reported_ksd(sample, capsys):
    import stein_coreset as sc

    d, X, S = sample
    M = np.array([[2.0, 0.3], [0.3, 0.5]])
    np.save(d / "M.npy", M)
    rc, _, _ = _run(
        [
            "compress",
            d / "X.npy",
            "--scores",
            d / "S.npy",
            "--method",
            "standard",
            "--size",
            10,
            "--bandwidth",
            0.7,
            "--precond",
            d / "M.npy",
            "--out",
            d / "k.npz",
        ],
        capsys,
    )
    assert rc == 0
    z = _load(d / "k.npz")
    want = sc.ksd(
        z["points"],
        S[z["indices"]],
        weights=z["weights"],
        kernel=sc.SteinKernel(sc.IMQ(sigma=0.7), M=M),
    )
    assert float(z["ksd"]) == pytest.approx(want, rel=1e-10)
    assert json.loads(str(z["info"]))["bandwidth"] == 0.7
    np.save(d / "M3.npy", np.eye(3))
    rc, _, err = _run(
        [
            "compress",
            d / "X.npy",
            "--scores",
            d / "S.npy",
            "--method",
            "standard",
            "--size",
            10,
            "--precond",
            d / "M3.npy",
        ],
        capsys,
    )
    assert "--precond must be a (2, 2) matrix" in _one_line_error(rc, err)


# --- no positional pair misread, one table split by columns, --version ----------------------


def test_two_positional_npy_files_are_never_read_as_points_and_scores(sample, capsys):
    d, X, S = sample
    np.save(d / "X1.npy", X + 1)
    rc, _, err = _run(["compress", d / "X.npy", d / "X1.npy", "--method", "skt", "--size", 5],
                      capsys)
    line = _one_line_error(rc, err)
    assert "no --scores" in line and "--scores FILE" in line


def test_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("stein-coreset ")


def test_the_version_is_written_once_in_meson_build(capsys):
    import pathlib
    import re

    import stein_coreset as sc

    root = pathlib.Path(__file__).resolve().parents[1]
    if not (root / "meson.build").is_file():
        pytest.skip("needs the source tree")
    written = re.findall(r"^  version: '([^']+)'", (root / "meson.build").read_text(), re.M)
    assert written == [sc.__version__]
    pyproject = (root / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert not re.search(r"^version\s*=", pyproject, re.M)
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"stein-coreset {sc.__version__}"


def test_one_csv_with_points_scores_and_na_split_by_columns(sample, capsys):
    d, X, S = sample
    with open(d / "both.csv", "w") as f:
        f.write("x1,x2,s1,s2\n")
        for i, (x, s) in enumerate(zip(X, S, strict=True)):
            cells = [repr(float(v)) for v in (*x, *s)]
            if i == 7:
                cells[2] = "NA"
            f.write(",".join(cells) + "\n")
    argv = ["compress", d / "both.csv", "--score-columns", "s1,s2", "--method", "st", "--size",
            6, "--out", d / "c.npz"]
    rc, _, err = _run(argv, capsys)
    assert "1 of the 50 rows" in _one_line_error(rc, err)
    rc, out, _ = _run([*argv, "--nan-policy", "omit"], capsys)
    assert rc == 0 and "dropped 1 rows" in out
    z = _load(d / "c.npz")
    keep = np.arange(50) != 7
    ref = sc.compress(X[keep], S[keep], size=6, method="st")
    np.testing.assert_array_equal(z["points"], np.asarray(ref.points))
    assert z["draws"].shape == (6, 2)
    np.testing.assert_allclose(z["draws"].mean(axis=0), z["weights"] @ z["points"])
    rc, _, _ = _run(["compress", d / "both.csv", "--x-columns", "0:2", "--score-columns", "2:4",
                     "--method", "st", "--size", 6, "--nan-policy", "omit", "--out",
                     d / "c2.npz"], capsys)
    assert rc == 0
    np.testing.assert_array_equal(_load(d / "c2.npz")["indices"], z["indices"])
    rc, _, err = _run(["compress", d / "both.csv", "--score-columns", "nope", "--method", "st",
                       "--size", 6], capsys)
    assert "no column 'nope'" in _one_line_error(rc, err)


def test_out_npy_is_refused_with_the_name_to_use(sample, capsys):
    d, X, S = sample
    rc, _, err = _run(["compress", d / "X.npy", "--scores", d / "S.npy", "--method", "standard",
                       "--size", 3, "--out", d / "X.npy"], capsys)
    line = _one_line_error(rc, err)
    assert "is an .npz archive" in line and "X.npz" in line and "overwrite" not in line


def test_precond_scale_is_the_default_and_identity_is_available(sample, capsys):
    d, X, S = sample
    base = ["compress", d / "X.npy", "--scores", d / "S.npy", "--method", "st", "--size", 8]
    _run([*base, "--out", d / "a.npz"], capsys)
    _run([*base, "--precond", "scale", "--out", d / "b.npz"], capsys)
    _run([*base, "--precond", "identity", "--out", d / "c.npz"], capsys)
    a, b, c = (json.loads(str(_load(d / f"{k}.npz")["info"])) for k in "abc")
    assert a["preconditioner"] == b["preconditioner"] == "scale"
    assert c["preconditioner"] == "identity"


# --- --out checked before any work, Ctrl-C exits 130 -------------------------------------------


@pytest.mark.parametrize("out, needle", [
    ("", "names no file"),
    ("DIR/", "names no file"),
    ("DIR/sub.npz", "is a directory"),
    ("DIR", "is a directory"),
    ("DIR/missing/c.npz", "directory does not exist"),
    ("/proc/c.npz", "cannot write"),
    ("/sys/c.npz", "cannot write"),
])
def test_a_bad_out_is_refused_before_compressing(sample, capsys, monkeypatch, out, needle):
    # before: --out '' wrote ./.npz; a directory, /proc or /sys was refused only after the whole
    # compression, naming the temporary file
    d, X, S = sample
    (d / "sub.npz").mkdir()
    if out.startswith("/") and not os.path.isdir(os.path.dirname(out)):
        pytest.skip(f"no {os.path.dirname(out)} here")
    if out.startswith("/proc") and os.access("/proc", os.W_OK) and os.geteuid() != 0:
        pytest.skip("/proc is writable here")

    def never(*a, **k):
        raise AssertionError("compress ran before --out was checked")

    monkeypatch.setattr(compress_mod, "compress", never)
    import stein_coreset

    monkeypatch.setattr(stein_coreset, "compress", never)
    rc, _, err = _run(["compress", d / "X.npy", "--scores", d / "S.npy", "--method", "st",
                       "--size", 5, "--out", out.replace("DIR", str(d))], capsys)
    line = _one_line_error(rc, err)
    assert "--out" in line and needle in line and ".probe" not in line and ".part" not in line


def test_ctrl_c_exits_130_within_a_second_and_leaves_no_file(tmp_path):
    # before: the CLI exited 14-38 s after SIGINT
    import signal
    import time

    rng = np.random.default_rng(0)
    X = rng.standard_normal((2**17, 8)) + 0.3  # st to size n: ~10^11 flops, long anywhere
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "S.npy", -X)
    out = tmp_path / "out" / "c.npz"
    out.parent.mkdir()
    p = subprocess.Popen(
        [sys.executable, "-m", "stein_coreset", "compress", str(tmp_path / "X.npy"),
         "--scores", str(tmp_path / "S.npy"), "--method", "st", "--size", str(2**17),
         "--seed", "0", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        # SIGINT as a terminal leaves it: a run started in the background (`cmd &`) hands its
        # children SIGINT ignored, and Python then keeps it ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(3.0)  # imports, reading, then the C++ loops
    if p.poll() is not None:
        # (it once exited at once with a usage error, and the test skipped without a word)
        assert p.returncode == 0, p.communicate()[1]
        pytest.skip("the compression finished before the signal")
    t0 = time.perf_counter()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert time.perf_counter() - t0 < 1.0
    assert p.returncode == 130 and "interrupted" in err and "Traceback" not in err
    assert os.listdir(out.parent) == []


@pytest.mark.parametrize("kind, needle", [
    ("truncated.npy", "is truncated"),
    ("garbage.npy", "not a valid .npy"),
    ("garbage.npz", "not a valid .npz"),
    ("truncated.npz", "not a valid .npz"),
])
def test_a_corrupt_input_file_is_a_one_line_error_naming_the_file(sample, capsys, kind, needle):
    # before: "BadZipFile: File is not a zip file" (no file name), NumPy's "pickled data"
    # message for a file that is no array, "mmap length is greater than file size"
    d, X, S = sample
    good = (d / "X.npy").read_bytes()
    np.savez(d / "full.npz", X=X, S=S)
    data = {"truncated.npy": good[: len(good) // 2], "garbage.npy": b"hello, world\n" * 10,
            "garbage.npz": b"not a zip archive", "truncated.npz":
            (d / "full.npz").read_bytes()[:300]}[kind]
    bad = d / kind
    bad.write_bytes(data)
    for argv in (["compress", bad, "--scores", d / "S.npy"], ["compress", bad]):
        rc, _, err = _run([*argv, "--method", "st", "--size", 5, "--out", d / "o.npz"], capsys)
        line = _one_line_error(rc, err)
        assert kind in line and needle in line
    if kind.endswith(".npy"):
        pytest.importorskip("dask")
        rc, _, err = _run(["compress", bad, d / "X.npy", "--scores", d / "S.npy", d / "S.npy",
                           "--method", "st", "--size", 5, "--out", d / "o.npz"], capsys)
        line = _one_line_error(rc, err)
        assert kind in line and needle in line


# --- trust at the boundary: output files, misuse warnings, the stages line -------------------


@pytest.fixture
def chain_files(tmp_path):
    """A 3-d Gaussian chain (mean [1, -2, 0.5]) with its exact scores, as .npy files."""
    rng = np.random.default_rng(0)
    mean = np.array([1.0, -2.0, 0.5])
    X = mean + rng.standard_normal((1000, 3))
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "s.npy", -(X - mean))
    return tmp_path


@pytest.mark.parametrize("out", ["-", os.devnull])
def test_out_dash_or_devnull_prints_the_summary_and_writes_nothing(chain_files, capsys, out,
                                                                   monkeypatch):
    monkeypatch.chdir(chain_files)
    before = set(os.listdir(chain_files))
    rc, stdout, _ = _run(["compress", "x.npy", "--scores", "s.npy", "--method", "skt",
                          "--size", 16, "--out", out], capsys)
    assert rc == 0
    assert "skt: " in stdout and "->" not in stdout
    assert "stages (KSD): stein_thinning" in stdout and " won" in stdout
    assert set(os.listdir(chain_files)) == before
    assert not os.path.exists(os.devnull + ".npz")


def test_an_existing_output_is_replaced_only_with_force(chain_files, capsys):
    out = chain_files / "c.npz"
    out.write_bytes(b"keep me")
    argv = ["compress", chain_files / "x.npy", "--scores", chain_files / "s.npy",
            "--method", "st", "--size", 8, "--out", out]
    rc, _, err = _run(argv, capsys)
    line = _one_line_error(rc, err)
    assert "exists" in line and "--force" in line
    assert out.read_bytes() == b"keep me"
    rc, stdout, _ = _run([*argv, "--force"], capsys)
    assert rc == 0 and f"-> {out}" in stdout
    assert _load(out)["indices"].size >= 1


def test_swapped_files_warn_on_one_line_naming_the_swap(chain_files, capsys):
    rc, _, err = _run(["compress", chain_files / "s.npy", "--scores", chain_files / "x.npy",
                       "--method", "skt", "--size", 16, "--out", "-"], capsys)
    assert rc == 0
    lines = [ln for ln in err.splitlines() if ln.startswith("stein-coreset: warning:")]
    assert len(lines) == 1 and "swapped" in lines[0]


def test_no_diagnostics_skips_the_checks_and_their_warning(chain_files, capsys):
    argv = ["compress", chain_files / "s.npy", "--scores", chain_files / "x.npy",
            "--method", "st", "--size", 16, "--out", chain_files / "c.npz", "--no-diagnostics"]
    rc, _, err = _run(argv, capsys)
    assert rc == 0
    assert "warning" not in err
    default = cli.build_parser().parse_args([str(a) for a in argv[:-1]])
    assert default.diagnostics is True


def test_a_transposed_input_is_refused_with_a_hint(tmp_path, capsys):
    X = np.random.default_rng(0).standard_normal((3, 500))
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "s.npy", -X)
    rc, _, err = _run(["compress", tmp_path / "x.npy", "--scores", tmp_path / "s.npy",
                       "--method", "skt", "--size", 2, "--out", "-"], capsys)
    assert "transpose" in _one_line_error(rc, err)


# --- unclear file errors -----------------------------------------------------------------------

def test_an_out_name_too_long_is_refused_before_any_work(sample, capsys, monkeypatch):
    d, X, S = sample
    called = []
    monkeypatch.setattr(sc, "compress", lambda *a, **k: called.append(1))
    rc, _, err = _run(["compress", d / "X.npy", "--scores", d / "S.npy", "--method", "st",
                       "--size", 5, "--out", d / ("o" * 300 + ".npz")], capsys)
    line = _one_line_error(rc, err)
    assert "--out: the file name" in line and "304 bytes long" in line and "Errno" not in line
    assert not called


def test_chains_of_different_dimensions_are_refused_naming_both_files(tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "a.npz", X=rng.standard_normal((30, 2)), S=rng.standard_normal((30, 2)))
    np.savez(tmp_path / "b.npz", X=rng.standard_normal((30, 3)), S=rng.standard_normal((30, 3)))
    rc, _, err = _run(["compress", tmp_path / "a.npz", tmp_path / "b.npz", "--method", "st",
                       "--size", 4, "--out", "-"], capsys)
    line = _one_line_error(rc, err)
    assert "b.npz has points of dimension d = 3" in line and "a.npz has d = 2" in line
    assert "Shapes do not align" not in line


def test_a_corrupt_second_chain_is_named_not_blamed_on_scores(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 2))
    np.savez(tmp_path / "a.npz", X=X, S=-X)
    (tmp_path / "b.npz").write_bytes((tmp_path / "a.npz").read_bytes()[:200])
    rc, _, err = _run(["compress", tmp_path / "a.npz", tmp_path / "b.npz", "--method", "st",
                       "--size", 4, "--out", "-"], capsys)
    line = _one_line_error(rc, err)
    assert "b.npz is not a valid .npz file" in line and "--scores" not in line


def test_a_bad_member_of_a_chain_names_the_file_and_member(tmp_path, capsys):
    import io
    import zipfile

    buf = io.BytesIO()
    np.save(buf, np.ones((30, 2)))
    np.savez(tmp_path / "a.npz", X=np.ones((30, 2)), S=np.ones((30, 2)))
    with zipfile.ZipFile(tmp_path / "b.npz", "w") as z:
        z.writestr("X.npy", buf.getvalue())
        z.writestr("S.npy", b"\x93NUMPX" + buf.getvalue()[6:])
    for argv in (["compress", tmp_path / "b.npz"],
                 ["compress", tmp_path / "a.npz", tmp_path / "b.npz"]):
        rc, _, err = _run(argv + ["--method", "st", "--size", 4, "--out", "-"], capsys)
        line = _one_line_error(rc, err)
        assert "b.npz:S is not a valid NumPy array (the magic string" in line, line

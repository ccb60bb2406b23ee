"""progress=True says what runs before a long stage starts and when it ends; progress=None is
"on a terminal"."""

import sys

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


# --- bars over the C++ loops: a counter the loops add to, polled by a thread
# (engine/cpu/src_cpp/progress.hpp)

import pytest  # noqa: E402

from stein_coreset import _progress  # noqa: E402
from stein_coreset.engine.cpu import _core, bridge  # noqa: E402


def _stein(n, seed=0):
    rng = np.random.default_rng(seed)
    X = 0.5 + 1.3 * rng.standard_normal((n, 2))
    return sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, -X)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_stein_thinning_counts_one_unit_per_step(n_threads):
    K = _stein(300).with_threads(n_threads)
    _core.progress_reset()
    K.stein_thinning(137)
    assert _core.progress_units() == 137


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("N, t", [(512, 1), (512, 3), (4096, 2), (96, 5)])
def test_kt_split_counts_the_units_its_bar_expects(N, t, n_threads):
    """The total a KT-SPLIT bar is drawn over is what the C++ counts, on the serial halvings and
    on the halvings run side by side (large N on two threads)."""
    K = _stein(N).with_threads(n_threads)
    _core.progress_reset()
    K.kt_split(np.arange(N, dtype=np.int64), t, 0.5, 7)
    assert _core.progress_units() == bridge.kt_split_units(N, t)


def test_kt_swap_counts_one_unit_per_position_visited():
    K = _stein(400)
    I = np.arange(0, 400, 20, dtype=np.int64)
    _core.progress_reset()
    K.kt_swap_refine(I, 3)
    done = _core.progress_units()
    assert done % I.size == 0 and I.size <= done <= 3 * I.size


def test_polled_bar_follows_the_counter_and_fills_when_the_block_ends(monkeypatch, capsys):
    pytest.importorskip("tqdm")
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    monkeypatch.setattr(_progress, "POLL_S", 0.01)
    count = [0]
    with _progress.polled("stage X", 10, lambda: count[0]) as bar:
        count[0] = 4
        import time

        deadline = time.monotonic() + 5.0
        while bar._seen < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bar._seen == 4  # the polling thread moved the bar while the block ran
    assert bar._seen == 10
    assert "stage X" in capsys.readouterr().err


def test_skt_draws_bars_during_its_cpp_loops(monkeypatch, capsys):
    pytest.importorskip("tqdm")
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    X = np.random.default_rng(0).normal(size=(2048, 2))
    sc.compress(X, -X, size=32, method="skt", progress=True, seed=0)
    err = capsys.readouterr().err
    assert "Stein thinning" in err and "KT-SPLIT" in err and "KT-Swap" in err


def test_short_stages_draw_no_bar(capsys):
    X = np.random.default_rng(0).normal(size=(300, 2))
    sc.compress(X, -X, size=8, method="skt", progress=True, seed=0)
    err = capsys.readouterr().err
    assert "KT-SPLIT" not in err and "skt done in" in err


def test_progress_none_follows_whether_stderr_is_a_terminal(monkeypatch):
    class Tty:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    monkeypatch.setattr(sys, "stderr", Tty(True))
    assert _progress.resolve(None) is True
    monkeypatch.setattr(sys, "stderr", Tty(False))
    assert _progress.resolve(None) is False
    assert _progress.resolve(True) is True
    with pytest.raises(TypeError, match="progress"):
        _progress.resolve("yes")


def test_plain_bar_names_its_unit_and_scales_kernel_entries(monkeypatch, capsys):
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    bar = _progress._Plain("KT-SPLIT", 534_752_192, "entries")
    bar.update(42_795_126)
    bar.close()
    err = capsys.readouterr().err
    assert "KT-SPLIT: 42.8M/534.8M kernel entries (8%" in err


def test_a_progress_bar_without_a_thread_to_spare_does_not_fail_the_work(monkeypatch):
    # before: RuntimeError("can't start new thread") from the bar's poller ended the call
    import threading

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with _progress.polled("work", 10, lambda: 5, None, True) as bar:
        done = "ran"
    assert done == "ran" and bar is not None

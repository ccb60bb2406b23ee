"""Progress reporting for long runs: tqdm when installed, else a plain line on stderr.

Three shapes: :func:`progress_bar` wraps a Python loop; :func:`counter_bar` is a bar advanced
to a count (a device loop reporting between launches); :func:`polled` draws a bar for a C++ loop
that runs without the GIL, from a thread that polls a counter the loop increments
(``_core.progress_units``, engine/cpu/src_cpp/progress.hpp). Bars of stages shorter than
:data:`DELAY_S` never appear.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

#: Seconds a stage runs before its bar is drawn (shorter stages stay silent).
DELAY_S = 0.5
#: Seconds between two reads of a polled counter.
POLL_S = 0.2


def resolve(progress) -> bool:
    """A ``progress`` argument as a bool: ``None`` (the default of the public entry points) is
    "on a terminal": progress when stderr is a TTY, silent in pipes, files, CI and notebooks'
    captured output (as PyMC does). Raises ``TypeError`` naming ``progress`` otherwise."""
    if progress is None:
        try:
            return bool(sys.stderr.isatty())
        except (AttributeError, ValueError):  # replaced or closed stderr
            return False
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None, got {type(progress).__name__}")
    return progress


def _count(k: int, unit: str) -> str:
    if unit != "entries" or k < 10_000:
        return str(k)
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if k >= div:
            return f"{k / div:.1f}{suffix}"
    return str(k)  # pragma: no cover


class _Plain:
    """The bar without tqdm: one ``\\r``-rewritten line on stderr, at most twice a second,
    with the unit counted ("kernel entries" scaled as 1.2G)."""

    def __init__(self, desc: str, total: int, unit: str = "it"):
        self.desc, self.total, self.n, self.unit = desc, int(total), 0, unit
        self._t0 = time.perf_counter()
        self._last = 0.0
        self._drawn = False

    def update(self, k: int = 1) -> None:
        self.n += k
        now = time.perf_counter()
        if now - self._t0 >= DELAY_S and (now - self._last > 0.5 or self.n >= self.total):
            unit = "kernel entries" if self.unit == "entries" else self.unit
            pct = 100.0 * self.n / max(self.total, 1)
            print(f"\r{self.desc}: {_count(self.n, self.unit)}/{_count(self.total, self.unit)} "
                  f"{unit} ({pct:.0f}%, {now - self._t0:.1f} s)", end="",
                  file=sys.stderr, flush=True)
            self._last, self._drawn = now, True

    def close(self) -> None:
        if self._drawn:
            print(file=sys.stderr, flush=True)


def _bar(desc: str, total: int, unit: str = "it"):
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _Plain(desc, total, unit)
    return tqdm(desc=desc, total=int(total), leave=False, delay=DELAY_S, unit=unit,
                unit_scale=unit == "entries")


def progress_bar(iterable, desc: str = "", total: int | None = None):
    """Wrap ``iterable`` in a progress bar on stderr."""
    total = len(iterable) if total is None else total
    bar = _bar(desc, total)
    try:
        for item in iterable:
            yield item
            bar.update(1)
    finally:
        bar.close()


class CounterBar:
    """A bar over ``total`` units moved to a count with :meth:`advance_to` (never backwards);
    ``unit``: "steps", or "entries" (kernel evaluations, shown as 1.2G)."""

    def __init__(self, desc: str, total: int, unit: str = "steps"):
        self.total = int(total)
        self._bar = _bar(desc, self.total, unit)
        self._seen = 0
        self._lock = threading.Lock()

    def advance_to(self, done: int) -> None:
        with self._lock:
            done = min(int(done), self.total)
            if done > self._seen:
                self._bar.update(done - self._seen)
                self._seen = done

    def close(self) -> None:
        self._bar.close()


def counter_bar(desc: str, total: int, unit: str = "steps") -> CounterBar:
    """A :class:`CounterBar` (call ``close()`` when the stage ends)."""
    return CounterBar(desc, total, unit)


@contextmanager
def polled(desc: str, total: int, read, reset=None, enabled: bool = True, unit: str = "steps"):
    """A bar for a loop that runs without the GIL and counts its work in a shared counter.

    ``reset()`` (if given) zeroes the counter, then a daemon thread moves the bar to ``read()``
    every :data:`POLL_S` seconds until the block ends; a block that completes fills the bar. With
    ``enabled`` false (or ``total`` < 1) nothing is drawn and no thread starts.
    """
    if not enabled or total < 1:
        yield None
        return
    if reset is not None:
        reset()
    bar = CounterBar(desc, total, unit)
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(POLL_S):
            bar.advance_to(read())

    th = threading.Thread(target=poll, name="stein_coreset-progress", daemon=True)
    try:
        th.start()
    except RuntimeError:  # no thread to spare (a limit on threads): the bar moves at the end
        th = None
    try:
        yield bar
        bar.advance_to(total)
    finally:
        stop.set()
        if th is not None:
            th.join()
        bar.close()


def stage(message: str) -> None:
    """One line on stderr for a stage without a bar, through ``tqdm.write`` when tqdm is
    installed so open bars stay intact."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        print(message, file=sys.stderr, flush=True)
        return
    tqdm.write(message, file=sys.stderr)

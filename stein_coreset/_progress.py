"""Progress reporting for long runs: tqdm when installed, else a plain line on stderr."""

from __future__ import annotations

import sys
import time


class _Plain:
    def __init__(self, iterable, desc, total):
        self.iterable, self.desc = iterable, desc
        self.total = total if total is not None else len(iterable)

    def __iter__(self):
        t0, last = time.perf_counter(), 0.0
        for i, item in enumerate(self.iterable):
            now = time.perf_counter()
            if now - last > 0.5 or i + 1 == self.total:
                print(
                    f"\r{self.desc}: {i + 1}/{self.total} ({now - t0:.1f} s)",
                    end="",
                    file=sys.stderr,
                )
                last = now
            yield item
        print(file=sys.stderr)


def progress_bar(iterable, desc: str = "", total: int | None = None):
    """Wrap ``iterable`` in a progress bar on stderr."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _Plain(iterable, desc, total)
    return tqdm(iterable, desc=desc, total=total, leave=False)


def stage(message: str) -> None:
    """One line on stderr for a stage without a bar (e.g. a C++ loop that reports nothing
    until it returns), through ``tqdm.write`` when tqdm is installed so open bars stay intact."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        print(message, file=sys.stderr, flush=True)
        return
    tqdm.write(message, file=sys.stderr)

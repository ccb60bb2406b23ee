"""Extract and run every example of README.md and docs/*.md.

    python tools/doc_examples.py [--list] [FILE.md ...]

Python blocks (```python) of one file run in order in one namespace, in a scratch directory, as
a reader would paste them. ``stein-coreset`` lines of shell blocks are parsed by the real
argument parser (every flag must exist, a ``compress`` line must pair its scores explicitly).
A block right after an ``<!-- example: skip REASON -->`` line is not run (the reason is
printed). Exit status 1 when an example fails.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILES = ["README.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")
    if p.name != "gpu.md"  # GPU examples: tools/device/gpu_check.py runs them on a GPU machine
)]
FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"<!--\s*example:\s*skip\s*(.*?)\s*-->")


def blocks(path: Path):
    """(language, first line number, code, skip reason or None) of each fenced block."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and m.group(1):
            lang, start = m.group(1), i + 1
            prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            skip = SKIP.search(prev)
            j = start
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append((lang, start + 1, "\n".join(lines[start:j]), skip.group(1) if skip else
                        None))
            i = j + 1
        else:
            i += 1
    return out


def cli_lines(code: str):
    """The ``stein-coreset ...`` commands of a shell block (continuations joined, ``&&`` split)."""
    code = code.replace("\\\n", " ")
    for line in code.splitlines():
        line = line.split("#", 1)[0]
        for part in line.split("&&"):
            part = part.strip()
            if part.startswith("stein-coreset"):
                yield part


def check_cli(cmd: str):
    from stein_coreset import cli

    argv = shlex.split(cmd)[1:]
    parser = cli.build_parser()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:
            if e.code not in (0, None):
                raise ValueError(f"the parser refuses {cmd!r}") from None
            return
    if args.command == "compress" and len(args.files) == 2 and args.scores is None:
        if not all(f.endswith(".npz") for f in args.files):
            raise ValueError(f"{cmd!r}: two files without --scores (refused by the CLI)")


def run_file(rel: str, verbose: bool = True) -> list[str]:
    path = ROOT / rel
    failures = []
    ns: dict = {"__name__": "__doc_example__"}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            for lang, line, code, skip in blocks(path):
                where = f"{rel}:{line}"
                if skip is not None:
                    print(f"skip {where} ({skip})")
                    continue
                t = time.perf_counter()
                try:
                    if lang == "python":
                        with contextlib.redirect_stdout(io.StringIO()):
                            exec(compile(code, where, "exec"), ns)
                    elif lang in ("bash", "sh", "console"):
                        for cmd in cli_lines(code):
                            check_cli(cmd)
                    else:
                        continue
                except Exception:
                    failures.append(where)
                    print(f"FAIL {where}\n{traceback.format_exc()}")
                    continue
                if verbose:
                    print(f"ok   {where} ({lang}, {time.perf_counter() - t:.1f} s)")
        finally:
            os.chdir(cwd)
    return failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", default=DEFAULT_FILES)
    ap.add_argument("--list", action="store_true", help="list the blocks, run nothing")
    args = ap.parse_args(argv)
    if args.list:
        for rel in args.files:
            for lang, line, _, skip in blocks(ROOT / rel):
                print(f"{rel}:{line} {lang}" + (f" (skip: {skip})" if skip else ""))
        return 0
    failures = [f for rel in args.files for f in run_file(rel)]
    print(f"{len(failures)} failing example(s)" + (": " + ", ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

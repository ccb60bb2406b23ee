"""The ``compress`` command of ``stein-coreset``: reading the input files, the single-process
path (:func:`stein_coreset.compress`), the distributed path on chain files
(:func:`stein_coreset.distributed.run_cli`) and the output file.

Argument values are validated by ``compress``; the checks here are about files and flags:
readable arrays, POINTS and SCORES of one shape, NaN rows counted in the ``--nan-policy``
vocabulary, a (d, d) ``--precond``, an ``--out`` that names a new file and no input.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import sys
import warnings

import numpy as np

from . import _io

__all__ = ["CLIError", "cmd_compress", "load_array"]

#: Array names looked up, in order, in an ``.npz`` file when none is given.
POINT_KEYS, SCORE_KEYS = _io.POINT_KEYS, _io.SCORE_KEYS


class CLIError(Exception):
    """An error reported as one line on stderr with exit code 2."""


# ---------------------------------------------------------------------------------------------
# Reading and writing arrays
# ---------------------------------------------------------------------------------------------


def load_array(spec: str, what: str, keys=POINT_KEYS) -> np.ndarray:
    """Read a 2-D float array from ``.npy``, ``.npz`` (``file.npz:name`` picks an array) or
    ``.csv`` (comma separated, one optional header line, one row per point); 1-D ``.npy``/``.npz``
    input becomes one column (stein_coreset._io.load_points)."""
    try:
        return _io.load_points(spec, what, keys)
    except (ValueError, OSError) as e:
        raise CLIError(str(e)) from None


def _scores_from_points_file(points_spec: str):
    """When SCORES is omitted and POINTS is an .npz holding scores too, use those."""
    path, _ = _io.split_key(points_spec)
    if not path.lower().endswith(".npz") or not os.path.isfile(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            for k in SCORE_KEYS:
                if k in z.files:
                    return f"{path}:{k}"
    except Exception:  # unreadable: reading POINTS reports it, naming the file
        return None
    return None


def _parse_options(items):
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise CLIError(f"--option expects NAME=VALUE, got {item!r}")
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return v.tolist() if v.size <= 64 else f"array{v.shape}"
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return repr(v)


# ---------------------------------------------------------------------------------------------
# compress
# ---------------------------------------------------------------------------------------------


def _kernel_from_args(args, X):
    """The Stein kernel of ``--bandwidth`` / ``--precond`` (None: compress's default; without
    ``--bandwidth`` compress resolves the median M-distance bandwidth)."""
    import stein_coreset as sc

    if args.bandwidth is None and args.precond in (None, "scale"):
        return None  # compress's default: scale-free, median bandwidth
    M = None
    if args.precond == "scale":
        M = "scale"
    elif args.precond not in (None, "identity"):
        M = load_array(args.precond, "--precond", ("M", "precond", "cov"))
        d = M.shape[0] if X is None else X.shape[1]  # X None: the distributed path checks d
        if M.shape != (d, d):
            raise CLIError(f"--precond must be a ({d}, {d}) matrix, got shape {M.shape}")
    base = None if args.bandwidth is None else sc.IMQ(sigma=args.bandwidth)
    return sc.SteinKernel(base, M=M)


def cmd_compress(args) -> int:
    """``stein-coreset compress``: one chain in this process, or several on Dask."""
    if _distributed_requested(args):
        return _cmd_compress_distributed(args)
    if len(args.files) == 2:
        for f in args.files:  # a corrupt chain file is named, not blamed on a missing --scores
            _check_input(f, "FILE")
        raise CLIError(
            f"two input files ({args.files[0]}, {args.files[1]}) and no --scores: a second file "
            "is never taken for scores, since a second chain would be misread as them; pass "
            "the scores with --scores FILE (one per chain file, in order), or give chain .npz "
            "files that hold their own X and S"
        )
    if len(args.files) > 2:  # pragma: no cover - _distributed_requested takes these
        raise CLIError("several chain files need the distributed path")
    args.points = args.files[0]
    if args.scores is not None and len(args.scores) != 1:
        raise CLIError(f"--scores: {len(args.scores)} score files for 1 chain file")
    args.scores = args.scores[0] if args.scores else None
    return _compress_single(args)


def _columns(spec: str | None, names, d: int, flag: str):
    """Column indices of ``--x-columns`` / ``--score-columns``: comma-separated 0-based
    indices, ranges ``a:b`` (b excluded) or header names of a CSV file."""
    if spec is None:
        return None
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if ":" in part:
            a, _, b = part.partition(":")
            try:
                lo = int(a) if a.strip() else 0
                hi = int(b) if b.strip() else d
            except ValueError:
                raise CLIError(f"{flag}: {part!r} is not a range a:b of column numbers") from None
            out.extend(range(lo, hi))
        elif part.lstrip("-").isdigit():
            out.append(int(part))
        elif names is not None and part in names:
            where = [j for j, name in enumerate(names) if name == part]
            if len(where) > 1:  # before: the first of them, silently
                raise CLIError(
                    f"{flag}: the header names {len(where)} columns {part!r} (columns "
                    f"{', '.join(str(j) for j in where)}, 0-based); select them by number"
                )
            out.append(where[0])
        else:
            known = f"; the header has {', '.join(names)}" if names is not None else ""
            raise CLIError(f"{flag}: no column {part!r}{known}")
    bad = [c for c in out if not -d <= c < d]
    if bad or not out:
        raise CLIError(f"{flag}: columns {bad or spec!r} are not among the file's {d} columns")
    return [c % d for c in out]


def _load_single_input(args):
    """X, S and the scores' file name of the single-process path (``--x-columns`` /
    ``--score-columns`` split one table into points and scores)."""
    if args.x_columns is None and args.score_columns is None:
        X = load_array(args.points, "POINTS", POINT_KEYS)
        scores = args.scores or _scores_from_points_file(args.points)
        S = load_array(scores, "SCORES", SCORE_KEYS) if scores else None
        return X, S, scores
    if args.scores is not None:
        raise CLIError("--score-columns reads the scores from POINTS; do not give --scores too")
    try:
        table, names = _io.load_table(args.points, "POINTS", POINT_KEYS)
    except (ValueError, OSError) as e:
        raise CLIError(str(e)) from None
    d = table.shape[1]
    sc_cols = _columns(args.score_columns, names, d, "--score-columns")
    x_cols = _columns(args.x_columns, names, d, "--x-columns")
    if x_cols is None:
        x_cols = [j for j in range(d) if j not in set(sc_cols or [])]
    if sc_cols is not None and set(sc_cols) & set(x_cols):
        raise CLIError(f"--x-columns and --score-columns share columns "
                       f"{sorted(set(sc_cols) & set(x_cols))}")
    X = table[:, x_cols]
    S = None if sc_cols is None else table[:, sc_cols]
    return X, S, (None if S is None else f"{args.points} (columns {args.score_columns})")


def _compress_single(args) -> int:
    """Today's single-process ``compress POINTS [SCORES]`` (the whole input in this process)."""
    import stein_coreset as sc

    options = _parse_options(args.option)
    out = _check_out(args.out, [args.points, args.scores or _scores_from_points_file(
        args.points), args.precond], args.force)  # before any work
    X, S, scores = _load_single_input(args)
    if S is not None and S.shape != X.shape:
        raise CLIError(
            f"shape mismatch: SCORES has shape {S.shape} but POINTS has shape {X.shape}; "
            "they need one score row per point"
        )
    bad = ~np.isfinite(X).all(axis=1)
    if S is not None:
        bad |= ~np.isfinite(S).all(axis=1)
    n_bad = int(bad.sum())
    if n_bad and args.nan_policy == "raise":
        where = "POINTS or SCORES" if S is not None else "POINTS"
        raise CLIError(
            f"{n_bad} of the {X.shape[0]} rows of {where} contain NaN or inf; "
            "pass --nan-policy omit to drop them"
        )
    kernel = _kernel_from_args(args, X)
    with _warnings_as_lines():
        res = sc.compress(
            X,
            S,
            size=args.size,
            method=args.method,
            kernel=kernel,
            rank=args.rank,
            seed=args.seed,
            progress=args.progress,
            nan_policy=args.nan_policy,
            diagnostics=args.diagnostics,
            **options,
        )
    info = dict(res.info)
    info.update(
        method=res.method,
        kind=res.kind,
        size=len(res),
        requested_size=args.size,
        n=int(X.shape[0]),
        d=int(X.shape[1]),
        ksd=res.ksd,
        points_file=args.points,
        scores_file=scores,
        seed=args.seed,
        options=options,
        precond_file=args.precond,
    )
    where = _write_coreset(out, res, info)
    ksd = "n/a (no scores)" if res.ksd is None else f"{res.ksd:.4g}"
    dropped = f", dropped {n_bad} rows with NaN/inf" if n_bad else ""
    to = _summary_stream(out)
    print(
        f"{res.method}: {len(res)} of {X.shape[0]} points ({res.kind} weights), KSD {ksd}, "
        f"{info['time_s']:.2f} s{dropped}{where}", file=to
    )
    stages = res.summary().partition("; stages: ")[2]
    if stages:
        print(f"  stages (KSD): {stages}", file=to)
    return 0


#: --out values that ask for the summary line only, no file.
NO_FILE = _io.NO_FILE


def _check_out(out: str, inputs: list, force: bool = False):
    """The output --out names (:func:`stein_coreset._io.check_output`, the one output path):
    checked before any work, refused when it is empty, one of the inputs (in any spelling,
    ``--out chain`` being ``chain.npz``), a directory or another non-regular file, an existing
    file without ``--force``, or when its directory does not exist or cannot be written. A
    device or pipe (``--out /dev/stdout``) is written in place, without a suffix. ``None`` for
    :data:`NO_FILE` (print the summary only)."""
    try:
        return _io.check_output(out, inputs, force=force, what="--out",
                                force_hint="pass --force to replace it, --out - to print "
                                           "the summary only")
    except (ValueError, OSError) as e:
        raise CLIError(str(e)) from None


def _write_coreset(out, res, info: dict) -> str:
    """The output ``.npz`` of ``compress`` (single-process and distributed alike); returns the
    summary line's tail (``" -> FILE"``, or nothing for ``--out -``)."""
    if out is None:
        return ""
    # written atomically: an error or Ctrl-C never leaves a partial file behind
    try:
        name = _io.write_coreset(out, res, json.dumps(_jsonable(info)))
    except OSError as e:
        raise CLIError(str(e)) from None
    return f" -> {name}"


def _summary_stream(out):
    """Where the summary line goes: stderr when the coreset itself goes to stdout."""
    return sys.stderr if out is not None and out.is_stdout() else sys.stdout


@contextlib.contextmanager
def _warnings_as_lines():
    """Warnings of the library (input diagnostics, ...) as ``stein-coreset: warning: ...``
    lines on stderr, once each, instead of Python's file:line form."""
    # the filters as they are: a dependency's DeprecationWarning stays hidden
    with warnings.catch_warnings(record=True) as caught:
        try:
            yield
        finally:
            seen = set()
            for w in caught:
                msg = str(w.message)
                if msg not in seen:
                    seen.add(msg)
                    print(f"stein-coreset: warning: {msg}", file=sys.stderr)


def _holds_points_and_scores(spec: str) -> bool:
    """An ``.npz`` chain file (no ``:NAME``) holding both points and scores."""
    path, key = _io.split_key(spec)
    if key is not None or not path.lower().endswith(".npz") or not os.path.isfile(path):
        return False
    try:
        with np.load(path, allow_pickle=False) as z:
            names = set(z.files)
    except Exception:  # unreadable: reading it later reports it, naming the file
        return False
    return bool(names & set(POINT_KEYS)) and bool(names & set(SCORE_KEYS))


def _check_input(spec: str, what: str) -> None:
    """An input file, checked before any work (:func:`stein_coreset._io.check_array_file`: a
    regular file that fits in memory, with a valid header), as a one-line error naming it."""
    try:
        _io.check_array_file(_io.split_key(spec)[0], what)
    except (ValueError, OSError) as e:
        raise CLIError(str(e)) from None


def _header_shape(spec: str, what: str, keys, only_array: bool = True):
    """The 2-D shape of the array ``spec`` names, from its header (an .npy, an .npz member),
    or None for a CSV (read whole on a worker)."""
    path, key = _io.split_key(spec)
    _check_input(path, what)
    low = path.lower()
    try:
        if low.endswith(".npz"):
            import zipfile

            with zipfile.ZipFile(path) as z:
                members = [m[:-4] for m in z.namelist() if m.endswith(".npy")]
            key = _io.npz_member(path, members, key, keys, what, only_array=only_array)
        elif not low.endswith(".npy"):
            return None
        shape, _ = _io.array_file_header(path, key, what)
    except (ValueError, OSError) as e:
        raise CLIError(str(e)) from None
    shape = tuple(int(v) for v in shape)
    return (shape[0], 1) if len(shape) == 1 else shape


def _check_chain_shapes(files, scores) -> None:
    """Every chain file of the distributed path read from its header on the driver: a corrupt
    file is named (not a worker's error without a file name), and chains of different
    dimensions (before: Dask's raw ``('Shapes do not align: %s', ...)`` tuple) or scores of
    another shape than their points are refused before the graph is built."""
    first = None
    for i, f in enumerate(files):
        xs = _header_shape(f, "FILE", POINT_KEYS)
        sspec = f if scores is None else scores[i]
        ss = _header_shape(sspec, "--scores" if scores is not None else "FILE", SCORE_KEYS,
                           only_array=scores is not None)
        if xs is None:
            continue
        if len(xs) != 2:
            raise CLIError(f"FILE {f}: expected a 2-D (n, d) array, got shape {xs}")
        if ss is not None and ss != xs:
            raise CLIError(f"--scores: the scores of {f} ({sspec}) have shape {ss}, its points "
                           f"{xs}; they need one score row per point")
        if first is None:
            first = (f, xs[1])
        elif xs[1] != first[1]:
            raise CLIError(
                f"FILE {f} has points of dimension d = {xs[1]}, but {first[0]} has d = "
                f"{first[1]}; every chain must sample the same d-dimensional target"
            )


def _distributed_requested(args) -> bool:
    """Several chain files or a distributed flag: the Dask path. Two files are POINTS SCORES as
    before, unless both are chain files holding their own points and scores."""
    if any(v is not None for v in (args.workers, args.scheduler, args.block_size)):
        return True
    if args.scores is not None and len(args.files) > 1:
        return True
    if len(args.files) > 2:
        return True
    return len(args.files) == 2 and all(_holds_points_and_scores(f) for f in args.files)


def _cmd_compress_distributed(args) -> int:
    """``compress FILE... [--workers N | --scheduler ADDRESS] [--block-size M]`` on Dask
    (:func:`stein_coreset.distributed.run_cli`): one block per chain file, read on the workers;
    the driver holds only block coresets."""
    from . import distributed as scd
    from .distributed.files import check_workers

    if args.workers is not None and args.scheduler is not None:
        raise CLIError(
            "--workers starts a local cluster and --scheduler connects to a running one: "
            "give one of them"
        )
    if args.workers is not None and args.workers < 1:
        raise CLIError(f"--workers must be >= 1, got {args.workers}")
    if args.workers is not None:
        try:
            check_workers(args.workers)
        except ValueError as e:
            raise CLIError(str(e)) from None
    if args.block_size is not None and args.block_size < 1:
        raise CLIError(f"--block-size must be >= 1, got {args.block_size}")
    files = list(args.files)
    scores = list(args.scores) if args.scores is not None else None
    if scores is not None and len(scores) != len(files):
        raise CLIError(f"--scores: {len(scores)} score files for {len(files)} chain files; "
                       "give one per chain, in the same order")
    for f in files + (scores or []):
        if not os.path.exists(_io.split_key(f)[0]):
            raise CLIError(f"file not found: {f}")
    _check_chain_shapes(files, scores)
    options = _parse_options(args.option)
    if args.rank is not None:
        options["rank"] = args.rank
    out = _check_out(args.out, [*files, *(scores or []), args.precond], args.force)
    kernel = _kernel_from_args(args, None)
    try:
        res = scd.run_cli(
            files, scores=scores, size=args.size, method=args.method, seed=args.seed,
            workers=args.workers, scheduler=args.scheduler, block_size=args.block_size,
            kernel=kernel, nan_policy=args.nan_policy, progress=args.progress, **options,
        )
    except ImportError as e:
        raise CLIError(str(e)) from None
    info = dict(res.info)
    info.update(
        method=res.method,
        kind=res.kind,
        size=len(res),
        requested_size=args.size,
        ksd=res.ksd,
        points_files=files,
        scores_files=scores,
        seed=args.seed,
        options=options,
        precond_file=args.precond,
        scheduler=args.scheduler,
    )
    dest = _write_coreset(out, res, info)
    ksd = "n/a" if res.ksd is None else f"{res.ksd:.4g}"
    dropped = f", dropped {info['n_dropped']} rows with NaN/inf" if info["n_dropped"] else ""
    if args.workers is not None:
        where = f"a local cluster of {args.workers} workers"
    elif args.scheduler is not None:
        where = f"{args.scheduler} ({info.get('workers')} workers)"
    else:
        where = "the threaded scheduler"
    print(
        f"{res.method}: {len(res)} of {info['n']} points ({res.kind} weights), KSD {ksd}, "
        f"{info['time_s']:.2f} s, {info['n_blocks']} blocks on {where}{dropped}{dest}",
        file=_summary_stream(out),
    )
    return 0

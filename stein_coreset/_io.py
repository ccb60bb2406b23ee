"""File safety for the command line: atomic writes, no overwriting of inputs, strict readers.

The CLI (``cli.py``) reads points and scores from ``.npy``, ``.npz`` (``file.npz:NAME`` picks an
array) and ``.csv`` files and writes its coreset with ``np.savez``. These helpers keep three
promises:

- :func:`write_atomic` — the output appears whole or not at all: it is written to a temporary
  file in the destination's directory, flushed and fsynced, then moved over the destination with
  ``os.replace`` (atomic on POSIX and Windows). On any exception, ``KeyboardInterrupt`` included,
  the temporary file is removed and the destination is left as it was.
- :func:`refuse_overwrite_input` — an output path that names an input file (the same file by
  ``os.path.samefile`` or by resolved path, including ``--out chain`` where ``np.savez`` would
  append ``.npz`` and write ``chain.npz``) is refused before any work.
- :func:`check_input_file` — an input is a regular file (a FIFO, a character or block device
  such as ``/dev/zero`` behind a symbolic link, a socket or a directory is refused before it is
  opened), and what reading it needs (its size from ``os.stat``; for ``.npy`` / ``.npz`` the
  float64 arrays their headers describe) fits in memory (:func:`check_file_memory`, the message
  of :func:`stein_coreset._validation.check_buffer`).
- :func:`load_points` — a one-row CSV ``1,2,3`` is one point in 3 dimensions; ``;``-separated
  files, text cells, empty cells and ragged rows are a ``ValueError`` naming the file and line.

Errors are ``ValueError`` (bad content or a refused path) or ``FileNotFoundError`` /
``IsADirectoryError``; their messages name the file, so the CLI can print them as one line.
"""

from __future__ import annotations

import math
import os
import stat
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from typing import IO

import numpy as np

from ._validation import check_buffer

__all__ = [
    "POINT_KEYS",
    "SCORE_KEYS",
    "split_key",
    "savez_path",
    "write_atomic",
    "refuse_overwrite_input",
    "read_csv",
    "load_points",
    "npz_member",
    "array_file_header",
    "read_array_2d",
    "check_input_file",
    "check_file_memory",
    "check_out_name",
]

POINT_KEYS = ("X", "points", "samples", "x", "theta")
SCORE_KEYS = ("S", "scores", "grad", "gradients", "score")


def split_key(spec: str) -> tuple[str, str | None]:
    """``file.npz:name`` -> ("file.npz", "name"); anything else -> (spec, None)."""
    base, sep, key = spec.rpartition(":")
    if sep and base.lower().endswith(".npz") and key and os.sep not in key:
        return base, key
    return spec, None


def savez_path(path: str | os.PathLike) -> str:
    """The file ``np.savez(path, ...)`` actually writes: ``.npz`` is appended when missing."""
    path = os.fspath(path)
    return path if path.endswith(".npz") else path + ".npz"


def write_atomic(path: str | os.PathLike, writer: Callable[[IO[bytes]], object]) -> str:
    """Write a file atomically: ``writer(f)`` fills an open binary temporary file in the same
    directory, which then replaces ``path`` (``os.replace``) after ``flush`` and ``fsync``.

    ``path`` is used exactly as given (no suffix is appended: ``np.savez`` given a file object
    writes to it as is; pass :func:`savez_path` to get NumPy's naming). On any exception —
    ``KeyboardInterrupt`` too — the temporary file is removed and ``path`` is untouched.
    Returns ``path``.

    Example: ``write_atomic(savez_path(out), lambda f: np.savez(f, indices=idx))``.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(f"output {path} is a directory")
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"output directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(
        prefix="." + os.path.basename(path) + ".", suffix=".part", dir=directory
    )
    try:
        with os.fdopen(fd, "wb") as f:
            os.chmod(tmp, _file_mode(path))  # mkstemp makes 0600; keep the usual permissions
            writer(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable where the platform allows it
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return path


def write_coreset(path: str, res, info_json: str) -> str:
    """The ``.npz`` file of a :class:`~stein_coreset.Coreset` that ``stein-coreset compress``
    writes (single-process and distributed alike), atomically: indices, weights, points,
    method, kind, ksd (NaN without scores) and ``info`` as a JSON string; for an equal-weighted
    coreset also ``draws`` (the (size, d) equal-weight sample, repeats kept) and
    ``draw_indices``."""
    arrays = dict(
        indices=np.asarray(res.indices, dtype=np.int64),
        weights=np.asarray(res.weights, dtype=np.float64),
        points=np.asarray(res.points, dtype=np.float64),
        method=np.asarray(res.method),
        kind=np.asarray(res.kind),
        ksd=np.asarray(np.nan if res.ksd is None else res.ksd),
        info=np.asarray(info_json),
    )
    if getattr(res, "draws", None) is not None:
        arrays["draws"] = np.asarray(res.draws, dtype=np.float64)
        arrays["draw_indices"] = np.asarray(res.draw_indices, dtype=np.int64)
    return write_atomic(path, lambda f: np.savez(f, **arrays))


def _file_mode(path: str) -> int:
    """The mode of the file being replaced, or 0666 less the umask for a new one."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def refuse_overwrite_input(
    out_path: str | os.PathLike,
    input_paths: Iterable[str | os.PathLike | None],
    *,
    savez: bool = True,
    what: str = "--out",
) -> str:
    """Raise ``ValueError`` if the output would replace one of the inputs; return the path
    that will be written.

    ``out_path`` as the user gave it; with ``savez`` (the CLI writes with ``np.savez``) the file
    actually written is :func:`savez_path` of it, so ``--out chain`` is checked as
    ``chain.npz``. Inputs may be ``file.npz:NAME`` specs (the ``:NAME`` is dropped) or ``None``
    (skipped). Both the given and the written name are compared, by ``os.path.samefile`` (hard
    links, symlinks) and by resolved path.
    """
    given = os.fspath(out_path)
    written = savez_path(given) if savez else given
    ext = os.path.splitext(given)[1].lower()
    if savez and ext and ext != ".npz" and ext in (".npy", ".csv", ".txt", ".json", ".nc"):
        raise ValueError(
            f"{what} {given}: the coreset is an .npz archive (indices, weights, points, draws, "
            f"info); name it {os.path.splitext(given)[0]}.npz"
        )
    for spec in input_paths:
        if spec is None:
            continue
        src, _ = split_key(os.fspath(spec))
        if _same_file(written, src):
            raise ValueError(
                f"{what} {given} would overwrite the input file {src}; choose another output path"
            )
    return written


#: CSV cells read as missing (NaN), as pandas reads them: ``nan_policy`` then reports or drops
#: their rows.
NA_TOKENS = frozenset({"", "NA", "N/A", "n/a", "NaN", "nan", "-nan", "NULL", "null", "None",
                       "#N/A", "<NA>"})


def read_csv(path: str | os.PathLike) -> np.ndarray:
    """A comma-separated numeric table as a 2-D float64 array (rows are points)."""
    return read_csv_table(path)[0]


def read_csv_table(path: str | os.PathLike):
    """A comma-separated numeric table: ``(A, names)``, A a 2-D float64 array (rows are points),
    names the header's column names or None.

    One optional header line (a first line with a non-numeric cell) is skipped. A single row is
    one point (shape (1, d)); a single column is n one-dimensional points (shape (n, 1)).
    Missing cells (empty, ``NA``, ``NaN``, ``null``, ... :data:`NA_TOKENS`) are NaN, for
    ``nan_policy`` to report or drop. Read by pandas when it is installed (fast), else by a
    plain reader; either way ``ValueError`` names the file and the line for ``;``/tab
    separators, text cells and rows of different lengths.
    """
    path = os.fspath(path)
    try:
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None:
        header = _csv_header(path)
        try:
            df = pd.read_csv(
                path, header=0 if header is not None else None, comment="#",
                skip_blank_lines=True, skipinitialspace=True, na_values=sorted(NA_TOKENS),
                keep_default_na=True, encoding="utf-8-sig", dtype=str,
            )
        except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
            df = None
        if df is not None and df.shape[0] and df.shape[1]:
            try:
                A = df.apply(pd.to_numeric, errors="raise").to_numpy(dtype=np.float64)
            except (ValueError, TypeError):
                A = None
            if A is not None and (header is None or len(header) == A.shape[1]):
                if df.shape[1] == _csv_width(path, header is not None):
                    return A, header
    return _read_csv_plain(path)


def _csv_lines(path: str):
    with open(path, encoding="utf-8-sig", newline="") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if line and not line.startswith("#"):
                yield lineno, line


def _cell_value(c: str):
    if c in NA_TOKENS:
        return math.nan
    return float(c)


def _csv_header(path: str):
    """The header's names when the first line has a cell that is neither a number nor NA."""
    for _, line in _csv_lines(path):
        cells = [c.strip() for c in line.split(",")]
        if any(c not in NA_TOKENS and not _is_float(c) for c in cells):
            return cells
        return None
    return None


def _csv_width(path: str, has_header: bool) -> int:
    """Cells in the first data line (pandas pads short rows; the plain reader catches it)."""
    widths = {len(line.split(",")) for k, (_, line) in enumerate(_csv_lines(path))
              if k >= int(has_header)}
    return widths.pop() if len(widths) == 1 else -1


def _read_csv_plain(path: str):
    rows: list[list[float]] = []
    width = None
    names = None
    for lineno, line in _csv_lines(path):
        cells = [c.strip() for c in line.split(",")]
        try:
            values = [_cell_value(c) for c in cells]
        except ValueError:
            values = None
        if values is None:
            if not rows and names is None and not any(";" in c or "\t" in c for c in cells):
                names = cells  # the header line
                width = len(cells)
                continue
            sep = ";" if ";" in line else ("\t" if "\t" in line else None)
            if sep is not None and "," not in line:
                raise ValueError(
                    f"{path}, line {lineno}: cells are separated by {sep!r}; "
                    "the CSV reader expects commas"
                )
            col, bad = next(
                (j, c) for j, c in enumerate(cells) if c not in NA_TOKENS and not _is_float(c)
            )
            raise ValueError(f"{path}, line {lineno}, column {col + 1}: the cell {bad!r} is not "
                             "a number")
        if width is not None and len(values) != width:
            raise ValueError(
                f"{path}, line {lineno}: {len(values)} cells, but earlier lines have {width}"
            )
        width = len(values)
        rows.append(values)
    if not rows:
        raise ValueError(f"{path}: no data rows")
    return np.asarray(rows, dtype=np.float64), names


def _is_float(c: str) -> bool:
    try:
        float(c)
    except ValueError:
        return False
    return True


def load_table(
    spec: str | os.PathLike, what: str = "POINTS", keys: tuple[str, ...] = POINT_KEYS
):
    """:func:`load_points` with the CSV header's column names: ``(A, names or None)``."""
    path, _ = split_key(os.fspath(spec))
    names = None
    if os.path.splitext(path)[1].lower() == ".csv" and os.path.isfile(path):
        try:
            names = _csv_header(path)
        except (OSError, UnicodeDecodeError):
            names = None
    return load_points(spec, what, keys), names


def _npy_header(f):
    """(shape, dtype) of the NumPy array whose file ``f`` is positioned at its magic string."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    return tuple(shape), dtype


def npz_member(path: str, names, key: str | None, keys: tuple[str, ...], what: str, *,
               only_array: bool = True) -> str:
    """The array of an ``.npz`` holding ``names`` that ``path[:key]`` means (the rules of
    :func:`load_points`): ``key`` when given (it must be there), else the first of ``keys``
    present, else the only array (unless ``only_array`` is False: scores read from the points'
    own file must be named), else a ValueError naming ``what`` and the file."""
    names = list(names)
    if key is not None:
        if key not in names:
            raise ValueError(f"{what}: {path} has no array {key!r}; it holds {', '.join(names)}")
        return key
    found = [k for k in keys if k in names]
    if found:
        return found[0]
    if only_array and len(names) == 1:
        return names[0]
    raise ValueError(
        f"{what}: {path} holds arrays {', '.join(names) or '(none)'}, none named "
        f"{', '.join(keys)}; pick one with {path}:NAME"
    )


def array_file_header(path: str, key: str | None = None, what: str | None = None):
    """(shape, dtype) of an ``.npy`` file, or of the member ``key`` of an ``.npz``, from its
    header alone (the data is not read). A header that is not NumPy's is a ``ValueError``
    naming ``what`` (when given) and the file or member (before: "the magic string is not
    correct" or "EOF: reading array header", no file named)."""
    where = path if key is None else f"{path}:{key}"
    prefix = f"{what}: " if what else ""
    try:
        if key is None:
            with open(path, "rb") as f:
                return _npy_header(f)
        with zipfile.ZipFile(path) as z:
            if key + ".npy" not in z.namelist():
                if key in z.namelist():
                    raise ValueError(f"the member {key!r} is not a .npy array")
                raise KeyError(key)
            with z.open(key + ".npy") as f:
                return _npy_header(f)
    except KeyError:
        raise ValueError(f"{prefix}{path} has no array {key!r}") from None
    except (ValueError, EOFError, SyntaxError, zipfile.BadZipFile) as e:
        raise ValueError(f"{prefix}{where} is not a valid NumPy array ({e})") from None
    except OSError as e:
        raise ValueError(f"{prefix}cannot read {where}: {e.strerror or e}") from None


def read_array_2d(path: str, key: str | None = None) -> np.ndarray:
    """The float64 array of an ``.npy`` file or of the member ``key`` of an ``.npz``; a 1-D
    array is one column (as :func:`load_points` reads it)."""
    if key is None:
        A = np.load(path, allow_pickle=False)
    else:
        with np.load(path, allow_pickle=False) as z:
            A = z[key]
    A = np.asarray(A, dtype=np.float64)
    return A[:, None] if A.ndim == 1 else A

_FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_input_file(path: str, what: str) -> os.stat_result:
    """``os.stat`` of an input file, refused before it is opened unless it is a regular file:
    a FIFO would block in ``open()`` and a device such as ``/dev/zero`` (also behind a
    symbolic link named ``zero.csv``) never ends. ``FileNotFoundError`` / ``IsADirectoryError``
    / ``ValueError``, each naming ``what`` and the file."""
    try:
        st = os.stat(path)  # follows symbolic links: the kind of the file that would be read
    except FileNotFoundError:
        raise FileNotFoundError(f"{what}: file not found: {path}") from None
    except OSError as e:
        raise ValueError(f"{what}: cannot read {path}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{what}: {path} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _FILE_KINDS if test(st.st_mode)), "not a regular file")
        link = ""
        if os.path.islink(path):
            link = f" (a symbolic link to {os.path.realpath(path)})"
        raise ValueError(
            f"{what}: {path}{link} is {kind}, not a regular file; the readers take .npy, .npz "
            "or .csv files only"
        )
    return st


#: Bytes of memory reading a CSV file may take per byte of text: the text, and a float64
#: table of up to 4 bytes per byte (a cell "1," is 2 bytes of text and 8 of float64).
CSV_BYTES_PER_BYTE = 5


def check_file_memory(path: str, what: str, st: os.stat_result | None = None) -> None:
    """Refuse, before reading, a file whose contents cannot fit in this machine's memory
    (:func:`stein_coreset._validation.check_buffer`'s message, naming ``what`` and the file):
    an ``.npy`` by the float64 array its header describes, an ``.npz`` by the sum over its
    members (headers and uncompressed sizes, nothing decompressed), a ``.csv`` by
    :data:`CSV_BYTES_PER_BYTE` times its size from ``os.stat``."""

    st = os.stat(path) if st is None else st
    ext = os.path.splitext(path)[1].lower()
    size = st.st_size
    if ext == ".csv":
        check_buffer(float(CSV_BYTES_PER_BYTE) * size, what,
                     f"reading {path} ({size} bytes of text as a float64 table)")
        return
    need = float(size)
    if ext == ".npz" and zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as z:
                need = float(sum(max(i.file_size, 1) for i in z.infolist()))
        except (zipfile.BadZipFile, OSError, ValueError):
            return  # unreadable: check_array_file / the reader report it, naming the file
    elif ext == ".npy":
        try:
            with open(path, "rb") as f:
                shape, dtype = _npy_header(f)
            need = max(need, 8.0 * float(np.prod(shape, dtype=np.float64)))
        except (ValueError, EOFError, OSError, SyntaxError):
            pass  # check_array_file reports it
    check_buffer(need, what, f"reading {path} ({size} bytes on disk) as float64")


def check_out_name(path: str, what: str = "--out", extra: int = 16) -> None:
    """Refuse an output name the file system cannot hold, before any work: a base name longer
    than ``NAME_MAX`` less ``extra`` bytes (the temporary name :func:`write_atomic` writes
    first is ``.NAME.XXXXXXXX.part``) or a path longer than ``PATH_MAX``."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    base = os.fsencode(os.path.basename(path))
    try:
        name_max = os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        name_max = 255
    try:
        path_max = os.pathconf(directory, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):
        path_max = 4096
    if len(base) + extra > name_max:
        raise ValueError(
            f"{what}: the file name {os.path.basename(path)[:40]}... is {len(base)} bytes long; "
            f"this file system allows {name_max} (at most {name_max - extra} here, since the "
            "output is first written under a temporary name); choose a shorter name"
        )
    full = len(os.fsencode(os.path.abspath(path))) + extra
    if full > path_max:
        raise ValueError(
            f"{what}: the path is {full - extra} bytes long; this system allows at most "
            f"{path_max - extra} here; choose a shorter path"
        )


def check_array_file(path: str, what: str) -> None:
    """Refuse, naming ``what`` and the file, an ``.npy`` without a NumPy header or shorter than
    its header says (before: "mmap length is greater than file size", or NumPy's "pickled
    data" message for a file that is no array at all) and an ``.npz`` that is not a zip
    archive (before: "BadZipFile: File is not a zip file", no file name). Before anything is
    opened, the file must be a regular file whose contents fit in memory
    (:func:`check_input_file`, :func:`check_file_memory`); an error while reading the header
    (``/proc/self/mem``: "Input/output error") names the file too."""
    st = check_input_file(path, what)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npz":
        try:
            is_zip = zipfile.is_zipfile(path)
        except OSError as e:
            raise ValueError(f"{what}: cannot read {path}: {e.strerror or e}") from None
        if not is_zip:
            raise ValueError(f"{what}: {path} is not a valid .npz file (not a zip archive: "
                             "truncated or corrupt?)")
    elif ext == ".npy":
        try:
            with open(path, "rb") as f:
                shape, dtype = _npy_header(f)
                start = f.tell()
        except (ValueError, EOFError, SyntaxError) as e:
            raise ValueError(f"{what}: {path} is not a valid .npy file ({e})") from None
        except OSError as e:
            raise ValueError(f"{what}: cannot read {path}: {e.strerror or e}") from None
        need = start + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        have = os.path.getsize(path)
        if dtype.hasobject:
            raise ValueError(f"{what}: {path} holds Python objects, not real numbers")
        if have < need:
            raise ValueError(f"{what}: {path} is truncated: its header describes a {shape} "
                             f"{dtype} array ({need} bytes) but the file has {have} bytes")
    check_file_memory(path, what, st)


def load_points(
    spec: str | os.PathLike, what: str = "POINTS", keys: tuple[str, ...] = POINT_KEYS
) -> np.ndarray:
    """Read a 2-D (n, d) float64 array from ``.npy``, ``.npz`` (``file.npz:NAME`` picks an
    array; by default the first of ``keys`` present, or the only array) or ``.csv``.

    A 1-D ``.npy``/``.npz`` array is n one-dimensional points (one column), as the CLI has
    always read it; a CSV row is always one point (:func:`read_csv`). Raises ``ValueError``
    naming ``what`` and the file on unreadable or non-numeric content.
    """
    path, key = split_key(os.fspath(spec))
    ext = os.path.splitext(path)[1].lower()
    check_array_file(path, what)  # a regular file that fits in memory, or an error naming it
    try:
        if ext == ".npy":
            A = np.load(path, allow_pickle=False)
        elif ext == ".npz":
            with np.load(path, allow_pickle=False) as z:
                member = npz_member(path, z.files, key, keys, what)
                array_file_header(path, member, what)  # a member that is no array: named
                A = z[member]
        elif ext == ".csv":
            A = read_csv(path)
        else:
            raise ValueError(
                f"{what}: unsupported file type {ext or '(none)'!r} of {path}; "
                "use .npy, .npz or .csv"
            )
    except ValueError as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith(what) else f"{what}: {msg}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"{what}: cannot read {path}: {e}") from None
    A = np.asarray(A)
    if A.dtype.kind not in "fiub":
        raise ValueError(f"{what}: {path} holds {A.dtype} data, not real numbers")
    A = A.astype(np.float64)
    if A.ndim == 1:
        A = A[:, None]
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"{what}: expected a 2-D (n, d) array in {spec}, got shape {A.shape}")
    return A

"""Files for the command line: strict readers, and the one output path (re-exported).

The CLI (``cli.py``) reads points and scores from ``.npy``, ``.npz`` (``file.npz:NAME`` picks an
array) and ``.csv`` files and writes its coreset with ``np.savez``. Every file the library
writes goes through :mod:`stein_coreset._output` (:func:`check_output` before any work, then
:func:`write_output`: never replaced without ``force``, never an input, atomic, devices written
in place); its names are re-exported here. The readers keep these promises:

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

import os
import stat
import zipfile

import numpy as np

from ._csv import NA_TOKENS, index_column, read_csv, read_csv_table
from ._output import (
    NO_FILE,
    Output,
    check_out_name,
    check_output,
    refuse_overwrite_input,
    savez_path,
    write_atomic,
    write_output,
)
from ._validation import check_buffer

__all__ = [
    "POINT_KEYS",
    "SCORE_KEYS",
    "split_key",
    "NO_FILE",
    "Output",
    "check_output",
    "write_output",
    "write_coreset",
    "savez_path",
    "write_atomic",
    "refuse_overwrite_input",
    "NA_TOKENS",
    "read_csv",
    "read_csv_table",
    "load_table",
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


def write_coreset(path, res, info_json: str) -> str:
    """The ``.npz`` file of a :class:`~stein_coreset.Coreset` that ``stein-coreset compress``
    and :func:`stein_coreset.distributed.run_cli` write, to ``path``, an
    :class:`~stein_coreset._output.Output` of :func:`check_output` (or a path, replaced
    atomically): indices, weights, points,
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
    if not isinstance(path, Output):  # a path, replaced atomically (tools, tests)
        return write_atomic(path, lambda f: np.savez(f, **arrays))
    return write_output(path, lambda f: np.savez(f, **arrays))


def load_table(
    spec: str | os.PathLike, what: str = "POINTS", keys: tuple[str, ...] = POINT_KEYS
):
    """:func:`load_points` with the CSV header's column names: ``(A, names or None)``; a row
    index column is kept (the caller selects the columns it reads)."""
    return _load(spec, what, keys, index_ok=True)


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
    return _load(spec, what, keys)[0]


def _load(spec, what: str, keys, index_ok: bool = False):
    """:func:`load_points` and the CSV header's names (None for the other files); a CSV row
    index column is refused unless ``index_ok`` (the caller selects columns)."""
    names = None
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
            A, names = read_csv_table(path)
            if not index_ok and index_column(A, names):
                raise ValueError(
                    f"{path}: its first column is a row index (unnamed, holding "
                    f"{int(A[0, 0])}, {int(A[0, 0]) + 1}, ...: pandas' to_csv, R's write.csv), "
                    "not a coordinate; write the file without it (index=False, row.names = "
                    "FALSE) or pick the columns with --x-columns / --score-columns"
                )
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
    return A, names

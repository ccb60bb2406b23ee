"""CSV tables of points and scores for the command line (:func:`read_csv_table`; the other
readers are in :mod:`stein_coreset._io`).

A CSV file here is text: comma-separated numbers, one point per line, one optional header line,
``#`` comments and blank lines skipped. What is not such a file is refused with a
``ValueError`` naming the file (and the line where there is one), before any parsing:

- a compressed or binary file (gzip, bzip2, xz, zstd, a zip archive such as an ``.npz``, an
  ``.npy``), by its first bytes — before: a raw ``UnicodeDecodeError`` without the file name;
- text in another encoding: UTF-16 and UTF-32 with a byte-order mark are read as such; bytes
  that are not UTF-8 (Latin-1 text, binary data) or NUL characters (UTF-16 without a mark)
  name the line;
- a header naming a column twice (selecting it by name would silently take the first one):
  the names are returned as they are, and ``--x-columns`` / ``--score-columns`` refuse an
  ambiguous name;
- a row index a writer added as the first column (pandas' ``to_csv``: an unnamed column of
  0, 1, 2, ...; R's ``write.csv``: ``""`` over 1, 2, 3, ...), which would be read as one more
  coordinate of every point: :func:`index_column` finds it and the reader of whole tables
  (:func:`stein_coreset._io.load_points`) refuses it; cells in double quotes are unquoted.

A comma ending every data line (some spreadsheet exports) is a trailing separator, not an
empty last column: it is dropped (before: the table had an extra all-NaN column and was
reported as a shape mismatch with the scores). Where the header names that last column
(``a,b,c`` over ``1,2,``), it stays: a column of missing values.
"""

from __future__ import annotations

import codecs
import io
import math
import os

import numpy as np

__all__ = ["NA_TOKENS", "read_csv", "read_csv_table", "csv_text", "index_column"]

#: CSV cells read as missing (NaN), as pandas reads them: ``nan_policy`` then reports or drops
#: their rows.
NA_TOKENS = frozenset({"", "NA", "N/A", "n/a", "NaN", "nan", "-nan", "NULL", "null", "None",
                       "#N/A", "<NA>"})

#: First bytes of files that are not text: (magic, what it is, what to do).
_MAGIC = (
    (b"\x1f\x8b", "gzip-compressed", "decompress it first (gunzip)"),
    (b"BZh", "bzip2-compressed", "decompress it first (bunzip2)"),
    (b"\xfd7zXZ\x00", "xz-compressed", "decompress it first (unxz)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "decompress it first (unzstd)"),
    (b"PK\x03\x04", "a zip archive (an .npz file?)", "give .npz files their .npz name"),
    (b"\x93NUMPY", "a NumPy .npy file", "give it its .npy name"),
)

#: Byte-order marks and their codecs (UTF-32 first: its little-endian mark starts with
#: UTF-16's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
    (codecs.BOM_UTF8, "utf-8-sig"),
)


def csv_text(path: str) -> str:
    """The text of a CSV file: UTF-8 (a byte-order mark allowed), or UTF-16 / UTF-32 with their
    byte-order mark; anything else is a ``ValueError`` naming the file (and the line)."""
    with open(path, "rb") as f:
        data = f.read()
    for magic, kind, fix in _MAGIC:
        if data.startswith(magic):
            raise ValueError(f"{path} is {kind}, not a CSV text file; {fix}")
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), "utf-8")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(
            f"{path}, line {line}: the byte {data[e.start]:#04x} is not "
            f"{encoding.upper().replace('-SIG', '')} text (a binary file, or text in another "
            "encoding such as Latin-1); save the file as UTF-8 text"
        ) from None
    if encoding == "utf-8-sig" or encoding == "utf-8":
        text = text.removeprefix("\ufeff")
    nul = text.find("\x00")
    if nul >= 0:
        raise ValueError(
            f"{path}, line {text.count(chr(10), 0, nul) + 1}: a NUL character: a binary file, "
            "or UTF-16 text without a byte-order mark; save the file as UTF-8 text"
        )
    return text


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
    separators, text cells and rows of different lengths, and the file for what is not UTF-8
    (or marked UTF-16 / UTF-32) text (:func:`csv_text`).
    """
    path = os.fspath(path)
    lines = _lines(csv_text(path))
    header = _header(lines)
    lines, header = _drop_trailing_separator(lines, header)
    try:
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None and lines:
        try:
            df = pd.read_csv(
                io.StringIO("\n".join(line for _, line in lines)),
                header=0 if header is not None else None, skip_blank_lines=True,
                skipinitialspace=True, na_values=sorted(NA_TOKENS), keep_default_na=True,
                dtype=str,
            )
        except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
            df = None
        if df is not None and df.shape[0] and df.shape[1]:
            try:
                A = df.apply(pd.to_numeric, errors="raise").to_numpy(dtype=np.float64)
            except (ValueError, TypeError):
                A = None
            if A is not None and (header is None or len(header) == A.shape[1]):
                if df.shape[1] == _width(lines, header is not None):
                    return A, header
    return _read_plain(path, lines, header)


def _lines(text: str):
    """``[(line number, stripped line)]`` of the lines that are neither blank nor comments."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            out.append((lineno, line))
    return out


def _cells(line: str):
    return [_unquote(c.strip()) for c in line.split(",")]


def _unquote(c: str) -> str:
    """A cell without the double quotes CSV writers put around text (R's write.csv quotes
    every name, and its row names: ``"x"``, ``"1"``), as pandas reads it."""
    return c[1:-1].strip() if len(c) >= 2 and c[0] == c[-1] == '"' else c


def index_column(A: np.ndarray, names) -> bool:
    """Whether the first column is a row index a writer added: unnamed in a header that names
    the others (pandas' ``to_csv`` writes ``,x,y``; R's ``write.csv`` ``"","x","y"``) and
    holding 0, 1, 2, ... or 1, 2, 3, ..."""
    if names is None or len(names) < 2 or names[0] != "" or not any(names[1:]):
        return False
    first = A[:, 0]
    steps = np.arange(A.shape[0], dtype=np.float64)
    return bool(np.array_equal(first, steps) or np.array_equal(first, steps + 1.0))


def _cell_value(c: str):
    if c in NA_TOKENS:
        return math.nan
    return float(c)


def _is_float(c: str) -> bool:
    try:
        float(c)
    except ValueError:
        return False
    return True


def _header(lines):
    """The header's names when the first line has a cell that is neither a number nor NA."""
    if not lines:
        return None
    cells = _cells(lines[0][1])
    if any(";" in c or "\t" in c for c in cells):
        return None  # another separator: the reader names it at this line
    if any(c not in NA_TOKENS and not _is_float(c) for c in cells):
        return cells
    return None


def _drop_trailing_separator(lines, header):
    """Lines and header without the comma that ends every data line, unless the header names
    the column it would open."""
    data = lines[1:] if header is not None else lines
    if not data or not all(line.endswith(",") for _, line in data):
        return lines, header
    if header is not None:
        width = len(_cells(data[0][1]))
        if header[-1] != "" and len(header) >= width:  # the header names that column
            return lines, header
        if header[-1] == "":
            header = header[:-1]
    out = [(k, line[:-1].rstrip()) for k, line in data]
    return (lines[:1] + out if header is not None else out), header


def _width(lines, has_header: bool) -> int:
    """Cells in the data lines when they all have as many (pandas pads short rows; the plain
    reader catches it), else -1."""
    widths = {len(line.split(",")) for k, (_, line) in enumerate(lines) if k >= int(has_header)}
    return widths.pop() if len(widths) == 1 else -1


def _read_plain(path: str, lines, header):
    rows: list[list[float]] = []
    width = None if header is None else len(header)
    start = 1 if header is not None else 0
    for lineno, line in lines[start:]:
        cells = _cells(line)
        try:
            values = [_cell_value(c) for c in cells]
        except ValueError:
            sep = ";" if ";" in line else ("\t" if "\t" in line else None)
            if sep is not None and "," not in line:
                raise ValueError(
                    f"{path}, line {lineno}: cells are separated by {sep!r}; "
                    "the CSV reader expects commas"
                ) from None
            col, bad = next(
                (j, c) for j, c in enumerate(cells) if c not in NA_TOKENS and not _is_float(c)
            )
            raise ValueError(f"{path}, line {lineno}, column {col + 1}: the cell {bad!r} is not "
                             "a number") from None
        if width is not None and len(values) != width:
            earlier = "the header has" if not rows else "earlier lines have"
            raise ValueError(f"{path}, line {lineno}: {len(values)} cells, but {earlier} {width}")
        width = len(values)
        rows.append(values)
    if not rows:
        raise ValueError(f"{path}: no data rows")
    return np.asarray(rows, dtype=np.float64), header

"""The one path every file the library writes takes: ``stein-coreset compress --out``,
``stein-coreset demo --save-chain`` / ``--plot`` and :func:`stein_coreset.distributed.run_cli`'s
``out`` (re-exported by :mod:`stein_coreset._io`).

:func:`check_output` is called before any work and :func:`write_output` once the result is
ready. Together they keep four promises:

- **No file is replaced without ``force``** — an existing file is refused
  (``FileExistsError``), and the write itself cannot replace a file that appeared meanwhile
  (without ``force`` the finished temporary file is hard-linked to its name, which fails when
  the name is taken, instead of renamed over it).
- **Never an input** — an output that is one of the inputs, by ``os.path.samefile`` (hard
  links, symbolic links) or by resolved path, in the name given and in the name written (``out``
  plus the suffix ``np.savez`` appends: ``--out chain`` writes ``chain.npz``), is refused even
  with ``force`` (:func:`refuse_overwrite_input`).
- **Atomic** — a regular file is written to a temporary file in its directory, flushed and
  fsynced, then moved to its name (:func:`write_atomic`); on any exception, ``KeyboardInterrupt``
  included, the temporary file is removed and the destination left as it was. A symbolic link
  is written through: its target is replaced, the link kept.
- **Devices and pipes as they are** — a character device or FIFO (``/dev/stdout``,
  ``/dev/full``, a named pipe), and any path under ``/dev/`` or ``/proc/self/fd/``, is written in
  place: no suffix is appended (before: ``--out /dev/stdout`` created ``/dev/stdout.npz``), no
  temporary file, no ``force`` (nothing is replaced); a write error names it
  (``/dev/full``: "No space left on device"). A block device or socket is refused.

Errors name the argument (``what``: ``--out``, ``out``, ``--save-chain``) and the file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO

__all__ = [
    "NO_FILE",
    "Output",
    "check_output",
    "write_output",
    "write_atomic",
    "savez_path",
    "refuse_overwrite_input",
    "check_out_name",
]

#: Output names that mean "no file" (print the summary only).
NO_FILE = ("-", os.devnull)

#: Path prefixes written in place, as streams (standard streams and inherited descriptors).
STREAM_PREFIXES = ("/dev/", "/proc/self/fd/")


@dataclass(frozen=True)
class Output:
    """A checked output: ``path`` is the file written (a symbolic link's target), ``name`` the
    name shown to the user (the suffix appended), ``stream`` whether it is a device or pipe
    written in place, ``force`` whether an existing file may be replaced, ``what`` the
    argument."""

    path: str
    name: str
    stream: bool
    force: bool
    what: str

    def is_stdout(self) -> bool:
        """Whether this output is the process's standard output (a summary printed there
        would be mixed into the file)."""
        if not self.stream:
            return False
        try:
            import sys

            a, b = os.stat(self.path), os.fstat(sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            return False
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def savez_path(path: str | os.PathLike) -> str:
    """The file ``np.savez(path, ...)`` actually writes: ``.npz`` is appended when missing."""
    path = os.fspath(path)
    return path if path.endswith(".npz") else path + ".npz"


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def _split_key(spec: str) -> str:
    """``file.npz:NAME`` -> ``file.npz`` (an input spec names its file)."""
    base, sep, key = spec.rpartition(":")
    if sep and base.lower().endswith(".npz") and key and os.sep not in key:
        return base
    return spec


def refuse_overwrite_input(
    out_path: str | os.PathLike,
    input_paths: Iterable[str | os.PathLike | None],
    *,
    savez: bool = True,
    what: str = "--out",
) -> str:
    """Raise ``ValueError`` if the output would replace one of the inputs; return the path
    that will be written.

    ``out_path`` as the user gave it; with ``savez`` (the coreset is written with ``np.savez``)
    the file actually written is :func:`savez_path` of it, so ``--out chain`` is checked as
    ``chain.npz``, and a ``.npy`` / ``.csv`` / ... name is refused with the ``.npz`` name to use.
    Inputs may be ``file.npz:NAME`` specs (the ``:NAME`` is dropped) or ``None`` (skipped). Both
    the given and the written name are compared, by ``os.path.samefile`` (hard links, symbolic
    links) and by resolved path.
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
        src = _split_key(os.fspath(spec))
        if _same_file(written, src) or _same_file(given, src):
            raise ValueError(
                f"{what} {given} would overwrite the input file {src}; choose another output path"
            )
    return written


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


def _stream(path: str, what: str) -> bool:
    """Whether ``path`` is written in place: an existing character device or FIFO (through
    links), or an existing path under :data:`STREAM_PREFIXES`. A block device or a socket is
    refused."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        kind = "a block device" if stat.S_ISBLK(st.st_mode) else "a socket"
        raise ValueError(f"{what}: {path} is {kind}; choose a regular file")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return True
    return os.path.abspath(path).startswith(STREAM_PREFIXES) and not stat.S_ISDIR(st.st_mode)


def check_output(
    out,
    inputs: Iterable = (),
    *,
    force: bool = False,
    what: str = "--out",
    suffix: str | None = ".npz",
    force_hint: str = "pass --force to replace it",
) -> Output | None:
    """Check an output path before any work; ``None`` for no file (``out`` None, ``"-"`` or
    ``os.devnull``).

    Parameters
    ----------
    out : str or os.PathLike or None
        The output as the user gave it.
    inputs : iterable of str, os.PathLike or None
        The input files (``file.npz:NAME`` specs allowed); the output may be none of them.
    force : bool
        Replace an existing regular file (never an input).
    what : str
        The argument's name, for the messages.
    suffix : str or None
        Appended when missing, as the writer does (``".npz"``: ``np.savez``); not to a device.
    force_hint : str
        What the "exists" message tells the user to do.

    Returns
    -------
    Output or None

    Raises
    ------
    TypeError
        ``out`` is not a path.
    ValueError
        The name holds no file, is an input, a block device or socket, an existing non-regular
        file, or too long; or its directory cannot be written (a probe file is created there
        and removed, so ``/proc``, ``/sys`` or a read-only mount fail now, not after the work).
    FileExistsError
        It exists and ``force`` is False.
    IsADirectoryError, FileNotFoundError
        It is a directory; its directory does not exist.
    """
    if out is None:
        return None
    if isinstance(out, bool) or not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"{what} must be a file path, got {type(out).__name__}")
    given = os.fspath(out)
    if isinstance(given, bytes):
        given = os.fsdecode(given)
    if given in NO_FILE:
        return None
    if not given or not os.path.basename(given.rstrip("/" + os.sep)) or given.endswith(
            ("/", os.sep)):
        raise ValueError(f"{what}: {given!r} names no file; give a file name such as "
                         f"coreset{suffix or ''}")
    if os.path.isdir(given):  # np.savez would write OUT.npz beside it: not what was meant
        raise IsADirectoryError(f"{what}: {given} is a directory; give a file name such as "
                                f"{os.path.join(given, 'coreset' + (suffix or ''))}")
    inputs = list(inputs)
    if _stream(given, what):
        refuse_overwrite_input(given, inputs, savez=False, what=what)
        return Output(given, given, True, force, what)
    savez = suffix == ".npz"
    written = refuse_overwrite_input(given, inputs, savez=savez, what=what)
    if suffix and not savez and not written.endswith(suffix):
        written += suffix
    if os.path.isdir(written):
        raise IsADirectoryError(f"{what}: {written} is a directory; give a file name such as "
                                f"{os.path.join(written, 'coreset' + (suffix or ''))}")
    target = os.path.realpath(written) if os.path.islink(written) else written
    if os.path.lexists(target) and not os.path.isfile(target):
        raise ValueError(f"{what}: {written} exists and is not a regular file; choose another "
                         "path")
    if os.path.exists(target) and not force:
        raise FileExistsError(f"{what}: {written} exists; {force_hint}, or choose another path")
    check_out_name(target, what)  # before: Errno 36 on a temporary name, after the work
    out_dir = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(out_dir):
        raise FileNotFoundError(f"{what}: directory does not exist: {out_dir}")
    try:
        fd, probe = tempfile.mkstemp(prefix=".stein-coreset-", suffix=".probe", dir=out_dir)
    except OSError as e:
        raise ValueError(f"{what}: cannot write {written}: {e.strerror or e}") from None
    os.close(fd)
    os.unlink(probe)
    return Output(target, written, False, force, what)


def write_output(target: Output, writer: Callable[[IO[bytes]], object]) -> str:
    """Write a checked output: ``writer(f)`` fills an open binary file. A regular file is written
    atomically (:func:`write_atomic`; without ``force``, never over a file that appeared since
    the check), a device or pipe in place. An error of the file system is an ``OSError`` naming
    the argument and the file. Returns the name shown to the user."""
    try:
        if target.stream:
            with open(target.path, "wb") as f:
                writer(f)
                f.flush()
        else:
            write_atomic(target.path, writer, replace=target.force)
    except FileExistsError:
        raise FileExistsError(f"{target.what}: {target.name} appeared while the result was "
                              "computed; it was left as it is (choose another path, or "
                              "replace it with force)") from None
    except OSError as e:
        err = OSError(f"{target.what}: cannot write {target.name}: {e.strerror or e}")
        err.errno = e.errno  # (kept out of the message, which names the file instead)
        raise err from None
    return target.name


def write_atomic(path: str | os.PathLike, writer: Callable[[IO[bytes]], object], *,
                 replace: bool = True) -> str:
    """Write a file atomically: ``writer(f)`` fills an open binary temporary file in the same
    directory, which then takes the name ``path`` after ``flush`` and ``fsync``: by
    ``os.replace`` (``replace``), else by ``os.link``, which raises ``FileExistsError`` instead
    of replacing a file that exists (where the file system has no hard links, an existence
    check then ``os.replace``).

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
        if replace:
            os.replace(tmp, path)
        else:
            _link_new(tmp, path)
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


def _link_new(tmp: str, path: str) -> None:
    """Give the finished ``tmp`` the name ``path`` unless that name is taken."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:  # no hard links here (FAT, some network file systems)
        if os.path.lexists(path):
            raise FileExistsError(path) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def _file_mode(path: str) -> int:
    """The mode of the file being replaced, or 0666 less the umask for a new one."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read where the system shows it (``os.umask`` sets it to read it,
    and a file another thread creates meanwhile would get mode 0666)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask

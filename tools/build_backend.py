"""The build backend: meson-python, saying on the terminal that it compiles.

pip runs a build backend with its output captured and shows only "Preparing metadata
(pyproject.toml) ... still running" while the C++/Cython extension compiles (minutes on two
cores); meson-python has no ``prepare_metadata_for_build_wheel``, so that step is the compile.
This wrapper writes one line to the controlling terminal (``/dev/tty``, which pip does not
capture; stderr when there is none, visible with ``pip install -v``) before it hands every hook
to meson-python unchanged. Named in pyproject.toml's ``[build-system]`` with
``backend-path = ["tools"]``.
"""

from __future__ import annotations

import os
import sys

import mesonpy

__all__ = [
    "build_sdist", "build_wheel", "build_editable", "get_requires_for_build_sdist",
    "get_requires_for_build_wheel", "get_requires_for_build_editable",
]

get_requires_for_build_sdist = mesonpy.get_requires_for_build_sdist
get_requires_for_build_wheel = mesonpy.get_requires_for_build_wheel
get_requires_for_build_editable = mesonpy.get_requires_for_build_editable
build_sdist = mesonpy.build_sdist

MESSAGE = (
    "stein_coreset: compiling the C++/Cython extension (about 1-4 min on two cores; once per "
    "install of the package: test and extra requirements install from requirements/*.txt "
    "without compiling again)"
)


def say(message: str = MESSAGE) -> None:
    """Write ``message`` to the terminal pip runs in, else to stderr."""
    try:
        fd = os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY)
    except OSError:
        print(message, file=sys.stderr, flush=True)
        return
    try:
        os.write(fd, ("\n" + message + "\n").encode())
    finally:
        os.close(fd)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    say()
    return mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    say("stein_coreset: compiling the C++/Cython extension for an editable install "
        "(later imports rebuild what changed)")
    return mesonpy.build_editable(wheel_directory, config_settings, metadata_directory)

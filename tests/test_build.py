"""The build installs every module: one meson.build per subpackage, naming each of its files."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "stein_coreset"


def test_every_package_folder_has_a_meson_build_naming_each_of_its_modules():
    if not (PKG / "meson.build").is_file():
        pytest.skip("needs the source tree")
    for init in PKG.rglob("__init__.py"):
        folder = init.parent
        build = folder / "meson.build"
        assert build.is_file(), f"{folder.relative_to(ROOT)} has no meson.build"
        listed = set(re.findall(r"'([^'/]+\.(?:py|cu|pyx))'", build.read_text()))
        on_disk = {p.name for p in folder.iterdir() if p.suffix in (".py", ".cu", ".pyx")}
        assert on_disk <= listed, f"{build.relative_to(ROOT)} misses {sorted(on_disk - listed)}"
        if folder != PKG:
            assert f"subdir('{folder.relative_to(PKG).as_posix()}')" in (
                folder.parent / "meson.build"
            ).read_text()

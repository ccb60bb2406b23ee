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
        listed = set(re.findall(r"'([^'/]+\.(?:py|pyx))'", build.read_text()))
        on_disk = {p.name for p in folder.iterdir() if p.suffix in (".py", ".pyx")}
        assert on_disk <= listed, f"{build.relative_to(ROOT)} misses {sorted(on_disk - listed)}"
        if folder != PKG:
            assert f"subdir('{folder.name}')" in (folder.parent / "meson.build").read_text()


@pytest.mark.parametrize("folder,build,suffixes", [
    ("engine/cuda/src_cuda", "engine/cuda/meson.build", (".cu", ".cuh")),  # NVRTC's, at run time
    ("engine/shared", "engine/shared/meson.build", (".inc",)),  # read by NVRTC too
    ("engine/cpu/src_cpp", "engine/cpu/src_cpp/meson.build", (".cpp",)),  # compiled
])
def test_every_compiled_source_is_named_by_its_meson_build(folder, build, suffixes):
    """The CUDA sources and the shared formulas are installed as package data (NVRTC reads them
    at run time); every C++ translation unit is compiled."""
    if not (PKG / "meson.build").is_file():
        pytest.skip("needs the source tree")
    text = (PKG / build).read_text()
    on_disk = sorted(p.name for p in (PKG / folder).iterdir() if p.suffix in suffixes)
    assert on_disk, folder
    missing = [f for f in on_disk if not re.search(rf"'(?:[\w/]*/)?{re.escape(f)}'", text)]
    assert missing == [], f"{build} misses {missing}"

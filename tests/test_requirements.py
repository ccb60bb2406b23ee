"""One compile per machine: the README installs the package once, then the test and extra
requirements from requirements/NAME.txt, which must say what pyproject's extras say."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
if not (ROOT / "requirements").is_dir():
    pytest.skip("needs the source tree", allow_module_level=True)
tomllib = pytest.importorskip("tomllib")


def extras() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]


def expand(name: str, table: dict) -> list:
    """An extra's requirements, self-references (stein_coreset[a,b]) expanded, in order."""
    out = []
    for req in table[name]:
        m = re.fullmatch(r"stein_coreset\[(.*)\]", req)
        parts = [r for sub in m.group(1).split(",") for r in expand(sub.strip(), table)] if m \
            else [req]
        for r in parts:
            if r not in out:
                out.append(r)
    return out


def read(path: pathlib.Path) -> list:
    return [line.strip() for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def test_every_extra_has_its_requirements_file_with_the_same_requirements():
    table = extras()
    files = {p.stem for p in (ROOT / "requirements").glob("*.txt")}
    assert files == set(table), "pyproject extras and requirements/*.txt differ"
    for name in table:
        assert read(ROOT / "requirements" / f"{name}.txt") == expand(name, table), name


def test_the_readme_installs_the_test_requirements_without_rebuilding_the_package():
    readme = (ROOT / "README.md").read_text()
    assert "pip install . && stein-coreset demo" in readme
    assert "pip install -r requirements/test.txt && python -m pytest" in readme
    assert 'pip install ".[test]"' not in readme


def test_install_hints_name_an_install_that_works_from_the_source_tree():
    """The package is not on PyPI: no hint may say pip install 'stein_coreset[...]'."""
    bad = []
    for path in (ROOT / "stein_coreset").rglob("*.py"):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"pip install ['\"]?stein_coreset\[", line):
                bad.append(f"{path.relative_to(ROOT)}:{i}")
    assert not bad, bad

"""The architecture stays put: docs from the method table, no import cycle, no private names
across modules (neither imported nor reached as ``module._name``)."""

import ast
import pathlib

import pytest

from stein_coreset.compress import METHODS

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "stein_coreset"


def test_api_reference_lists_every_method_option_with_its_default():
    api = ROOT / "docs" / "api.md"
    if not api.exists():
        pytest.skip("docs/api.md not in this checkout")
    text = api.read_text()
    for name, m in METHODS.items():
        assert f'### `method="{name}"`' in text, name
        for opt_name, opt in m.options.items():
            assert f"- `{opt_name}` (default `{opt.default!r}`): {opt.doc}" in text, (
                f"{name}.{opt_name}: run python docs/gen_api.py"
            )


def test_api_reference_carries_every_public_docstring_as_it_is_now():
    """docs/api.md is generated (python docs/gen_api.py): every public name of an importable
    module appears there with its current signature and docstring, so an edited docstring
    cannot leave the reference stale."""
    import importlib
    import runpy
    import sys

    api = ROOT / "docs" / "api.md"
    if not api.exists():
        pytest.skip("docs/api.md not in this checkout")
    text = api.read_text()
    path = list(sys.path)
    try:
        gen = runpy.run_path(str(ROOT / "docs" / "gen_api.py"), run_name="gen_api")
    finally:
        sys.path[:] = path
    stale = []
    for modname, _ in gen["MODULES"]:
        try:
            mod = importlib.import_module(modname)
        except ImportError:  # an optional extra not installed: its section is not checked
            continue
        for name in mod.__all__:
            qual = f"{modname}.{name}" if modname != "stein_coreset" else f"sc.{name}"
            if "\n".join(gen["_entry"](qual, getattr(mod, name))) not in text:
                stale.append(qual)
    assert not stale, f"run python docs/gen_api.py: stale entries {stale}"


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node


def test_algorithms_never_import_compress_or_cli():
    for path in (PKG / "algorithms").glob("*.py"):
        for node in _imports(path):
            mod = node.module or ""
            assert "compress" != mod.split(".")[-1] or node.level == 1, (path.name, mod)
            assert not mod.endswith(("cli", "demo")), (path.name, mod)
            if node.level == 2:  # from ..x import
                assert mod not in ("compress", "cli", "demo"), (path.name, mod)


def test_no_private_name_is_imported_from_a_sibling_module():
    allowed = {"_array_api", "_validation", "_threads", "_core", "_cuda", "_progress", "_io"}
    for path in PKG.rglob("*.py"):
        for node in _imports(path):
            if node.level == 0:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and alias.name not in allowed:
                    # the engine keeps its two private aliases inside kernels.py only
                    pytest.fail(f"{path.relative_to(ROOT)} imports {alias.name} from {node.module}")


def _module_aliases(tree):
    """Names bound to imported modules: ``import x.y as z``, ``from . import m as _m``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                names.add(alias.asname or alias.name)
    return names


def test_no_private_attribute_of_another_module_is_used():
    """``module._private`` across modules is the same coupling as ``from module import
    _private``: what two modules share gets a public name. (Tests may reach inside.)"""
    bad = []
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text())
        modules = _module_aliases(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
                continue
            owner, attr = node.value.id, node.attr
            if owner not in modules or not attr.startswith("_") or attr.startswith("__"):
                continue
            bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {owner}.{attr}")
    assert not bad, "\n".join(bad)


def test_the_source_passes_the_lint_rules_of_pyproject():
    """ruff with pyproject's [tool.ruff] rules, so the README's test command catches what CI's
    lint would (a 154-column docstring line once reached CI unseen)."""
    import shutil
    import subprocess
    import sys

    if not (ROOT / "pyproject.toml").exists():
        pytest.skip("not a source checkout")
    cmd = [shutil.which("ruff")] if shutil.which("ruff") else [sys.executable, "-m", "ruff"]
    proc = subprocess.run([*cmd, "check", "--no-cache", str(ROOT)], cwd=ROOT,
                          capture_output=True, text=True)
    assert "No module named ruff" not in proc.stderr, "ruff is in the test extras: pip install ruff"
    assert proc.returncode == 0, proc.stdout + proc.stderr

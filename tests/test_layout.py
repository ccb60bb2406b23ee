"""The architecture stays put: the API reference lists every public name, no import cycle, no
private names across modules (neither imported nor reached as ``module._name``)."""

import ast
import pathlib

import pytest

from stein_coreset.compress import METHODS

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "stein_coreset"


#: The modules the API reference (docs/api/*.md) documents, each name of their ``__all__``.
API_MODULES = [
    "stein_coreset",
    "stein_coreset.algorithms",
    "stein_coreset.estimators",
    "stein_coreset.datasets",
    "stein_coreset.distributed",
    "stein_coreset.diagnostics",
    "stein_coreset.integrations.pymc",
    "stein_coreset.integrations.arviz",
    "stein_coreset.integrations.jax",
]


def _autosummary_names():
    """{module: names} listed by the ``.. autosummary::`` blocks of docs/api/*.md, each under
    the ``.. module::`` (or ``currentmodule``) directive before it."""
    import re

    found: dict[str, set[str]] = {}
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        module, in_block = None, False
        for line in page.read_text().splitlines():
            m = re.match(r"\.\. (?:current)?module:: (\S+)", line)
            if m:
                module, in_block = m.group(1), False
            elif line.startswith(".. autosummary::"):
                in_block = True
            elif line.startswith("```"):
                in_block = False
            elif in_block and module and re.match(r"   [A-Za-z_][\w.]*$", line):
                found.setdefault(module, set()).add(line.strip())
    return found


def test_api_reference_lists_every_public_name_of_every_documented_module():
    """docs/api/*.md name each function and class by hand (autosummary, grouped by topic); a
    name added to a module's ``__all__`` must be added there too, or the site misses it."""
    import importlib

    if not (ROOT / "docs" / "api").is_dir():
        pytest.skip("docs/api not in this checkout")
    listed = _autosummary_names()
    missing = []
    for modname in API_MODULES:
        mod = importlib.import_module(modname)  # the integrations import their peers lazily
        missing += [f"{modname}.{n}" for n in mod.__all__ if n not in listed.get(modname, ())]
    assert not missing, f"add to the autosummary lists of docs/api/*.md: {missing}"


def test_api_method_table_carries_every_method_option_with_its_default():
    """The method table is generated from METHODS at build time (docs/_ext), and the page
    uses it."""
    import importlib.util

    ext = ROOT / "docs" / "_ext" / "generated_reference.py"
    if not ext.exists():
        pytest.skip("docs/_ext not in this checkout")
    pytest.importorskip("docutils")  # the docs extra
    assert "```{method-table}" in (ROOT / "docs" / "api" / "methods.md").read_text()
    spec = importlib.util.spec_from_file_location("generated_reference", ext)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = "\n".join(gen.method_table_md())
    for name, m in METHODS.items():
        assert f'```{{rubric}} method="{name}"' in text, name
        for opt_name, opt in m.options.items():
            assert f"- `{opt_name}` (default `{opt.default!r}`): " in text, (name, opt_name)


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

"""The architecture stays put: the API reference lists every public name, no import cycle, no
private names across modules, the engine's layout (one folder per backend holding all its code,
one protocol, one dispatch, only the cpu bridge importing the extension) and the size of the
modules. The source tree is read (an editable install points there anyway)."""

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
    "stein_coreset.integrations.stan",
    "stein_coreset.integrations.numpyro",
    "stein_coreset.integrations.results",
    "stein_coreset.datasets.posteriordb",
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
    pytest.importorskip("sphinx")
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
    """Only the package's private modules (``_array_api``, ``_core`` ...) are imported by a
    leading-underscore name; a private name inside a module stays in it."""
    allowed = {"_array_api", "_validation", "_threads", "_core", "_progress", "_io"}
    for path in PKG.rglob("*.py"):
        for node in _imports(path):
            if node.level == 0:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and alias.name not in allowed:
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


# ---- the engine: who may import _core, one folder per backend -------------------------------

#: The one module that imports the extension: the cpu backend's bridge.
_CORE_IMPORTERS = {"engine/cpu/bridge.py"}


def _imports_core(tree) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.module and node.module.split(".")[-1] == "_core":
                return True
            if any(a.name == "_core" for a in node.names):
                return True
        elif isinstance(node, ast.Import):
            if any(a.name.split(".")[-1] == "_core" for a in node.names):
                return True
    return False


def test_only_the_cpu_bridge_imports_core():
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel not in _CORE_IMPORTERS and _imports_core(ast.parse(path.read_text(), str(path))):
            offenders.append(rel)
    assert offenders == [], f"only {sorted(_CORE_IMPORTERS)} may import _core: {offenders}"


def _module_level_imports(path, root):
    """The package modules a module imports when it is loaded (function-level imports and
    ``if TYPE_CHECKING:`` blocks excluded), as paths relative to ``root``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    pkg = path.parent.relative_to(root).parts
    out = set()

    def visit(stmts):
        for node in stmts:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                base = pkg[: len(pkg) - node.level + 1] + tuple((node.module or "").split("."))
                base = tuple(p for p in base if p)
                for alias in node.names:
                    for cand in (base + (alias.name,), base):
                        mod = root.joinpath(*cand)
                        if mod.with_suffix(".pyx").is_file():  # _core: an extension, a leaf
                            break
                        if mod.with_suffix(".py").is_file():
                            out.add(mod.with_suffix(".py").relative_to(root).as_posix())
                            break
                        if (mod / "__init__.py").is_file():
                            out.add((mod / "__init__.py").relative_to(root).as_posix())
                            break

    visit(tree.body)
    return out


def _graph():
    root = PKG
    return {
        p.relative_to(root).as_posix(): _module_level_imports(p, root) for p in root.rglob("*.py")
    }


def test_the_package_import_graph_has_no_cycle():
    # kernels -> engine -> (_validation, _core): nothing imports back up
    root = PKG
    graph = {
        p.relative_to(root).as_posix(): _module_level_imports(p, root) for p in root.rglob("*.py")
    }
    state = {}

    def visit(mod, stack):
        state[mod] = "open"
        for dep in sorted(graph.get(mod, ())):
            if state.get(dep) == "open":
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(dep) :] + [dep]))
            if dep not in state:
                visit(dep, stack + [dep])
        state[mod] = "done"

    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [mod])
    engine = [m for m in graph if m.startswith("engine/")]
    assert "engine/__init__.py" in graph["kernels/radial.py"]
    assert not any(k.startswith("kernels/") for m in engine for k in graph[m])
    assert "engine/__init__.py" not in graph["_validation.py"]


# ---- backends are objects: nobody outside the engine tests a backend's name ------------------

def _compares_a_backend_name(tree) -> list[int]:
    from stein_coreset.engine import BACKENDS

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                if any(isinstance(v, ast.Constant) and v.value in BACKENDS for v in values):
                    lines.append(node.lineno)
    return lines


def test_no_module_outside_the_engine_branches_on_a_backend_name():
    offenders = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith("engine/"):
            continue
        lines = _compares_a_backend_name(ast.parse(path.read_text(), filename=str(path)))
        if lines:
            offenders[rel] = lines
    assert offenders == {}, f"backend names compared outside stein_coreset/engine: {offenders}"


def test_the_detector_sees_a_backend_name_branch():
    tree = ast.parse('if K.backend.name == "cuda":\n    pass\nif b in ("cpu", "xp"):\n    pass\n')
    assert _compares_a_backend_name(tree) == [1, 3]


def test_the_capability_table_lists_every_operation_on_every_backend():
    from stein_coreset.engine import BACKENDS, OPERATIONS, capability_table

    table = capability_table().splitlines()
    assert table[0] == "| operation | " + " | ".join(f"`{b}`" for b in BACKENDS) + " |"
    assert len(table) == 2 + len(OPERATIONS)
    assert all(row.count("|") == len(BACKENDS) + 2 for row in table)


def test_the_developer_page_shows_the_capability_table_as_generated():
    from stein_coreset.engine import capability_table

    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "engine.md").read_text()
    table = page.split("<!-- capability-table -->\n")[1].split("<!-- /capability-table -->")[0]
    assert table.strip() == capability_table().strip()


def test_no_backend_subclasses_another_backend():
    """Each backend implements what it declares; none inherits another's implementation (the
    protocol, :class:`~stein_coreset.engine.Backend`, is the only base)."""
    from stein_coreset.engine import BACKENDS, Backend, get_backend

    for name in BACKENDS:
        assert type(get_backend(name)).__bases__ == (Backend,), name


def test_every_backend_implements_every_method_of_what_it_declares():
    """A backend that declares an operation (its ``how``) defines every method of it; the
    protocol's methods only raise."""
    from stein_coreset.engine import BACKENDS, OPERATIONS, Backend, get_backend

    missing = []
    for name in BACKENDS:
        cls = type(get_backend(name))
        assert set(cls.how) <= set(OPERATIONS), (name, set(cls.how) - set(OPERATIONS))
        for op in cls.how:
            for meth in OPERATIONS[op].methods:
                if getattr(cls, meth) is getattr(Backend, meth):
                    missing.append(f"{name}.{meth} ({op})")
    assert missing == []


def test_every_operation_finds_a_backend_that_declares_it():
    """The one dispatch point ends, for every backend and operation, at a backend that declares
    the operation (the declared fallbacks name real backends and go round in no circle)."""
    from stein_coreset.engine import BACKENDS, OPERATIONS, get_backend, runner

    for name in BACKENDS:
        for op in OPERATIONS:
            assert op in runner(get_backend(name), op).how, (name, op)


def test_the_detector_sees_a_fallback_circle():
    from stein_coreset.engine import Backend, runner

    class Loop(Backend):
        name = "xp"
        how = {}
        fallbacks = {"block": "xp"}

    with pytest.raises(RuntimeError, match="circle"):
        runner(Loop(), "block")


def _all_imports(path):
    """Every package module a module names in an import (module level or in a function)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    pkg = path.parent.relative_to(PKG).parts
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = pkg[: len(pkg) - node.level + 1] + tuple((node.module or "").split("."))
            out |= {"/".join(p for p in base + (a.name,) if p) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("stein_coreset"):
            out |= {node.module.replace(".", "/").removeprefix("stein_coreset/") + "/" + a.name
                    for a in node.names}
    return out


def test_the_reference_backend_imports_nothing_compiled():
    """engine/reference is array-API code only: no import reaches the cpu or cuda folders or
    the extension."""
    offenders = []
    for path in sorted((PKG / "engine" / "reference").rglob("*.py")):
        for mod in _all_imports(path):
            if mod.startswith(("engine/cpu", "engine/cuda")) or mod.endswith("_core"):
                offenders.append(f"{path.relative_to(PKG)}: {mod}")
    assert offenders == []


def test_compiled_sources_live_in_their_backends_folder():
    """C++ under engine/cpu/src_cpp, CUDA under engine/cuda/src_cuda, the formulas both read
    under engine/shared; nothing compiled anywhere else in the repository."""
    homes = {".cpp": ("engine/cpu/src_cpp",), ".hpp": ("engine/cpu/src_cpp",),
             ".inc": ("engine/cpu/src_cpp", "engine/shared"), ".cu": ("engine/cuda/src_cuda",),
             ".cuh": ("engine/cuda/src_cuda",), ".pyx": ("engine/cpu",),
             ".pxd": ("engine/cpu",)}
    stray = []
    for suffix, where in homes.items():
        for path in ROOT.rglob(f"*{suffix}"):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(("build/", "tests/", ".", "asv_benchmarks/env")):
                continue
            if not any(rel.startswith(f"stein_coreset/{w}/") and path.parent ==
                       PKG.joinpath(*w.split("/")) for w in where):
                stray.append(rel)
    assert stray == []
    assert not (ROOT / "src_cpp").exists()


#: Most lines a module of the package may have: past it, split it by responsibility.
MAX_MODULE_LINES = 600


def test_every_module_stays_under_the_size_a_reader_can_hold():
    big = {p.relative_to(PKG).as_posix(): n for p in PKG.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert big == {}, f"split by responsibility (<= {MAX_MODULE_LINES} lines): {big}"


def _python_subprocesses_without_cwd(source):
    """Lines of ``subprocess`` calls that start ``sys.executable -c``/``-m`` with no ``cwd``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"
                and node.args and isinstance(node.args[0], (ast.List, ast.Tuple))):
            continue
        argv = node.args[0].elts
        starts_python = bool(argv) and ast.unparse(argv[0]) == "sys.executable"
        inline = any(isinstance(a, ast.Constant) and a.value in ("-c", "-m") for a in argv[1:2])
        if starts_python and inline and not any(k.arg == "cwd" for k in node.keywords):
            found.append(node.lineno)
    return found


def test_tests_run_python_subprocesses_outside_the_source_tree():
    """``python -c``/``-m`` puts its working directory first on sys.path: run from the clone's
    root (CI tests the installed wheel there) it imports the source tree, whose compiled
    extension is not built, so every such call names a ``cwd``."""
    assert _python_subprocesses_without_cwd(
        "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'])\n") == [2]
    offenders = {p.name: lines for p in sorted((ROOT / "tests").glob("*.py"))
                 if (lines := _python_subprocesses_without_cwd(p.read_text()))}
    assert offenders == {}


#: What a test module may import unguarded: the package's own dependencies and the test extra.
_TEST_BASE = {"numpy", "scipy", "array_api_compat", "pytest", "_pytest", "array_api_strict",
              "hypothesis", "sybil", "stein_coreset", "support", "conftest"}
#: An optional package whose ``importorskip`` also guarantees the ones it requires.
_BROUGHT_BY = {"numpyro": {"jax"}, "pymc": {"arviz", "pytensor"}, "stan": {"httpstan"},
               "distributed": {"dask"}}


def _unguarded_optional_imports(source):
    """Line numbers of module-level imports of an optional package that no earlier
    ``pytest.importorskip`` of it (or of a package that requires it) guards."""
    import sys

    guarded, found = set(), []
    for node in ast.parse(source).body:
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Call) and getattr(sub.func, "attr", "") == "importorskip"
                    and sub.args and isinstance(sub.args[0], ast.Constant)):
                top = sub.args[0].value.split(".")[0]
                guarded |= {top} | _BROUGHT_BY.get(top, set())
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module]
        else:
            continue
        tops = {n.split(".")[0] for n in names}
        if tops - sys.stdlib_module_names - _TEST_BASE - guarded:
            found.append(node.lineno)
    return found


def test_test_modules_import_optional_packages_only_behind_importorskip():
    """CI runs the suite against the wheel with the test extra alone: a test module that
    imports an optional package unguarded stops the whole collection there."""
    assert _unguarded_optional_imports("import jax\nimport pytest\n") == [1]
    assert _unguarded_optional_imports(
        "import pytest\nnumpyro = pytest.importorskip('numpyro')\nimport jax.numpy\n") == []
    offenders = {p.name: lines for p in sorted((ROOT / "tests").glob("test_*.py"))
                 if (lines := _unguarded_optional_imports(p.read_text()))}
    assert offenders == {}

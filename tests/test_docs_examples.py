"""Every example of README.md and docs/*.md runs as written, and every output a page shows is
what the code prints: one test per documentation file, through sybil.

- ```python blocks of one file run in order in one namespace, in a scratch directory, as a
  reader would paste them; a block written as a doctest (``>>>`` lines followed by the output)
  has its printed output compared with what the page shows (``...`` matches anything, runs of
  whitespace compare equal);
- ``stein-coreset`` lines of shell blocks are parsed by the real argument parser
  (tools/doc_examples.py: every flag must exist, a ``compress`` line pairs its scores);
- ``<!-- skip: next "REASON" -->`` before a block skips it (sybil's marker).

docs/gpu.md is left out (tools/device/gpu_check.py runs its examples on a GPU machine).
"""

import doctest
import importlib.util
import unittest
from pathlib import Path

import pytest

sybil = pytest.importorskip("sybil", reason="the page checks need sybil (extras test, docs)")
from sybil.parsers.markdown import (  # noqa: E402
    CodeBlockParser,
    PythonCodeBlockParser,
    SkipParser,
)

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "tools" / "doc_examples.py").exists():
    pytest.skip("tools/doc_examples.py not in this checkout", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("doc_examples", ROOT / "tools" / "doc_examples.py")
doc_examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doc_examples)

#: The pages whose examples are checked.
FILES = ["README.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")
    if p.name != "gpu.md" and "_build" not in p.parts
)]

#: The optional peers a documentation file's examples import.
NEEDS = {
    "docs/integrations.md": ("pymc", "arviz", "jax"),
    "docs/integrations/stan.md": ("stan", "arviz"),
    "docs/integrations/numpyro.md": ("numpyro", "arviz"),
    "docs/integrations/blackjax.md": ("blackjax",),
    "docs/distributed.md": ("dask", "distributed", "zarr"),
}


def _cli(example):
    """The ``stein-coreset`` lines of a shell block must parse."""
    for cmd in doc_examples.cli_lines(example.parsed):
        doc_examples.check_cli(cmd)


SYBIL = sybil.Sybil(
    parsers=[
        PythonCodeBlockParser(
            doctest_optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        ),
        *(CodeBlockParser(language=lang, evaluator=_cli) for lang in ("bash", "sh", "console")),
        SkipParser(),
    ],
)


def run_page(rel: str) -> int:
    """Evaluate every example of the page (raising on the first failure); their number."""
    document = SYBIL.parse(ROOT / rel)
    document.namespace["__name__"] = "__doc_example__"
    n = 0
    for example in document:
        try:
            example.evaluate()
        except unittest.SkipTest:  # a block after a skip marker
            continue
        n += 1
    return n


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("rel", FILES)
def test_every_example_of_the_file_runs_as_written(rel, tmp_path, monkeypatch):
    for mod in NEEDS.get(rel, ()):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{rel} needs {mod}")
    monkeypatch.chdir(tmp_path)
    run_page(rel)


def test_a_shown_output_that_differs_from_the_printed_one_fails(tmp_path, monkeypatch):
    """The check compares outputs: a page whose shown output is stale does not pass."""
    page = tmp_path / "page.md"
    page.write_text("```python\n>>> print(1 + 1)\n3\n```\n")
    monkeypatch.chdir(tmp_path)
    document = SYBIL.parse(page)
    with pytest.raises(Exception, match="Expected"):
        for example in document:
            example.evaluate()

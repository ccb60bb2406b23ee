"""Every example of README.md and docs/*.md runs as written: tools/doc_examples.py,
one test per documentation file (Python blocks executed, ``stein-coreset`` lines parsed)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "tools" / "doc_examples.py").exists():
    pytest.skip("tools/doc_examples.py not in this checkout", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("doc_examples", ROOT / "tools" / "doc_examples.py")
doc_examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doc_examples)

#: The optional peers a documentation file's examples import.
NEEDS = {
    "docs/integrations.md": ("pymc", "arviz", "jax"),
    "docs/distributed.md": ("dask", "distributed", "zarr"),
}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("rel", doc_examples.DEFAULT_FILES)
def test_every_example_of_the_file_runs_as_written(rel):
    for mod in NEEDS.get(rel, ()):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{rel} needs {mod}")
    assert doc_examples.run_file(rel, verbose=False) == []

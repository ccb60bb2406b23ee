"""Every ``Examples`` section of the installed package's docstrings runs and prints what it
says (doctest), so a documented output cannot go stale."""

import doctest
import importlib
import pkgutil

import pytest

import stein_coreset

#: Modules whose examples need an optional dependency, and the module they import.
# the optional extra each module's examples run on (the module itself imports without it)
NEEDS = {
    "stein_coreset.integrations.arviz": "arviz",
    "stein_coreset.integrations.pymc": "pymc",
    "stein_coreset.integrations.jax": "jax",
    "stein_coreset.integrations.numpyro": "numpyro",
    "stein_coreset.integrations.stan": "stan",
    "stein_coreset.integrations.stan_model": "stan",
    "stein_coreset.integrations.stan_draws": "xarray",
    "stein_coreset.integrations.results": "xarray",
    "stein_coreset.integrations.containers": "xarray",
    "stein_coreset.integrations.summaries": "pandas",
    "stein_coreset.integrations.pymc_model": "pymc",
    "stein_coreset.distributed": "dask",
}


def _modules():
    names = [m.name for m in pkgutil.walk_packages(stein_coreset.__path__, "stein_coreset.")]
    # __main__ runs the command line when imported
    return sorted(n for n in names
                  if not n.startswith("stein_coreset.engine.cuda") and n !=
                  "stein_coreset.__main__")


def test_the_public_api_documents_its_examples():
    for obj in (stein_coreset.compress, stein_coreset.ksd, stein_coreset.mmd,
                stein_coreset.energy_distance, stein_coreset.median_bandwidth,
                stein_coreset.SteinKernel):
        _, found, examples = obj.__doc__.partition("Examples\n    --------\n")
        assert found and ">>> " in examples, obj.__name__


@pytest.mark.parametrize("name", _modules())
def test_every_docstring_example_of_the_module_runs_as_written(name):
    # a package's entry covers its submodules (stein_coreset.distributed.files, ...)
    for package, extra in NEEDS.items():
        if name == package or name.startswith(package + "."):
            pytest.importorskip(extra)
    try:
        module = importlib.import_module(name)
    except ImportError as e:  # an optional dependency of the module itself
        pytest.skip(f"{name}: {e}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                             verbose=False, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"

"""Sphinx configuration: the user guide (MyST markdown), the API reference (autosummary +
numpydoc, from the installed package's docstrings) and the experiments gallery (sphinx-gallery,
its figures drawn at build time from the JSON results beside the scripts).

    pip install ".[docs]"
    python -m sphinx -W --keep-going -n -b html docs docs/_build/html
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# document the installed package, not the source tree above (``python -m sphinx`` run from the
# repository root puts it first on sys.path, without the compiled extension)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.path.dirname(HERE)]

import stein_coreset  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "_ext"))

project = "stein_coreset"
author = "stein_coreset developers"
copyright = "the stein_coreset developers"
release = stein_coreset.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "generated_reference",  # docs/_ext: the method table (METHODS) and the CLI help
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "**/_cache",
    "Thumbs.db",
    ".DS_Store",
    # sphinx-gallery writes these beside the generated pages
    "auto_experiments/*.ipynb",
    "auto_experiments/*.py",
    "auto_experiments/*.json",
    "auto_experiments/*.zip",
    "auto_experiments/*.md5",
]
templates_path = ["_templates"]

# --- MyST: the pages stay plain markdown that also reads on GitHub
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

# --- autosummary / autodoc / numpydoc
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # the numpydoc Parameters sections carry the types
autodoc_default_options = {"member-order": "bysource"}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
default_role = "literal"  # `x` in a docstring is code, not an unresolved reference

# Nitpicky mode: every cross-reference must resolve. The ones below name third-party types
# (no intersphinx: the build runs offline); each is listed precisely, none by pattern.
nitpicky = True
nitpick_ignore: list[tuple[str, str]] = []

# --- sphinx-gallery: docs/experiments/gallery/plot_*.py, each loads the JSON result an
# experiment script stored beside itself (docs/experiments/NAME.json) and draws its figure; the
# experiments themselves (minutes each) are run by hand (docs/experiments/README.md)
sphinx_gallery_conf = {
    "examples_dirs": ["experiments/gallery"],
    "gallery_dirs": ["auto_experiments"],
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "min_reported_time": 1,
    "plot_gallery": "True",
    "within_subsection_order": "FileNameSortKey",
}

# --- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"stein_coreset {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
html_show_sourcelink = False

"""stein_coreset: debiased distribution compression and minimum Stein discrepancy estimation.

The public API (docs/api/): base kernels, the Stein kernel, discrepancies and ``compress``.
Building blocks live in :mod:`stein_coreset.algorithms`, estimators in
:mod:`stein_coreset.estimators`.
"""

import importlib.metadata

from .compress import Coreset, available_methods, compress
from .diagnostics import DiagnosticWarning
from .discrepancy import energy_distance, ksd, mmd
from .kernels import IMQ, Gaussian, Matern, RadialKernel, SteinKernel, median_bandwidth

try:  # written once, in meson.build's project(version:); the build puts it in the metadata
    __version__ = importlib.metadata.version("stein_coreset")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a build tree on sys.path
    __version__ = "unknown"

__all__ = [
    "RadialKernel",
    "IMQ",
    "Gaussian",
    "Matern",
    "SteinKernel",
    "median_bandwidth",
    "ksd",
    "mmd",
    "energy_distance",
    "compress",
    "Coreset",
    "available_methods",
    "DiagnosticWarning",
]

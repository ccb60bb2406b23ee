"""Building blocks of the paper, one module per algorithm family (names as in the paper)."""

from .kernel_thinning import kernel_thinning, kt_split, kt_swap
from .resample import resample
from .rpcholesky import weighted_rpcholesky
from .stein_thinning import stein_thinning

__all__ = [
    "weighted_rpcholesky",
    "stein_thinning",
    "kt_split",
    "kt_swap",
    "kernel_thinning",
    "resample",
]

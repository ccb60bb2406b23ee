"""Building blocks of the paper, one module per algorithm family (names as in the paper)."""

from .amd import LowRankPlusDiagonal, amd
from .cholesky_thinning import cholesky_thinning
from .compresspp import kt_compresspp
from .debias import low_rank_debias
from .kernel_thinning import kernel_thinning, kt_split, kt_swap
from .recombination import kt_swap_ls, recombination, recombination_thinning
from .resample import resample
from .rpcholesky import weighted_rpcholesky
from .stein_thinning import stein_thinning

__all__ = [
    "weighted_rpcholesky",
    "recombination",
    "kt_swap_ls",
    "recombination_thinning",
    "cholesky_thinning",
    "stein_thinning",
    "kt_split",
    "kt_swap",
    "kernel_thinning",
    "resample",
    "amd",
    "LowRankPlusDiagonal",
    "low_rank_debias",
    "kt_compresspp",
]

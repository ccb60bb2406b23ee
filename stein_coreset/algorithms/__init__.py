"""Building blocks of the paper, one module per algorithm family (names as in the paper)."""

from .amd import LowRankPlusDiagonal, amd
from .cholesky_thinning import cholesky_thinning
from .compresspp import compresspp_coreset, kt_compresspp
from .debias import low_rank_debias
from .kernel_thinning import kernel_thinning, kernel_thinning_coreset, kt_split, kt_swap
from .lskt import low_rank_stein_kernel_thinning
from .recombination import recombination, recombination_thinning
from .resample import iid_thinning, resample, standard_thinning
from .rpcholesky import weighted_rpcholesky
from .skt import stein_kernel_thinning
from .stein_thinning import stein_thinning, stein_thinning_coreset, stein_thinning_weights
from .swap_ls import kt_swap_ls
from .weighted import weighted_compression

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
    # the pipelines compress runs (one per method family)
    "standard_thinning",
    "iid_thinning",
    "stein_thinning_weights",
    "stein_thinning_coreset",
    "stein_kernel_thinning",
    "kernel_thinning_coreset",
    "low_rank_stein_kernel_thinning",
    "compresspp_coreset",
    "weighted_compression",
]

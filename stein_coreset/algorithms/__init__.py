"""Building blocks of the paper, one module per algorithm family (names as in the paper)."""

from .cholesky_thinning import cholesky_thinning
from .recombination import kt_swap_ls, recombination, recombination_thinning
from .rpcholesky import weighted_rpcholesky

__all__ = [
    "weighted_rpcholesky",
    "recombination",
    "kt_swap_ls",
    "recombination_thinning",
    "cholesky_thinning",
]

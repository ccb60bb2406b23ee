"""Building blocks of the paper, one module per algorithm family (names as in the paper)."""

from .amd import LowRankPlusDiagonal, amd
from .debias import low_rank_debias
from .rpcholesky import weighted_rpcholesky

__all__ = ["weighted_rpcholesky", "amd", "LowRankPlusDiagonal", "low_rank_debias"]

"""Building blocks of the paper, one module per algorithm family (names as in the paper)."""

from .rpcholesky import weighted_rpcholesky

__all__ = ["weighted_rpcholesky"]

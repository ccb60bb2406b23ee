"""Minimum Stein discrepancy estimators (Barp et al., NeurIPS 2019)."""

__all__: list[str] = []

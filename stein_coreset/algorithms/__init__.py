"""Building blocks of the paper, one module per algorithm family (names as in the paper)."""

__all__: list[str] = []

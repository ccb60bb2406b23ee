"""Array-API helpers of the engine: squared distances and the size of a blocked product's slab."""

from __future__ import annotations

from .. import _array_api as aa

__all__ = ["squared_distances", "SLAB_ENTRIES"]

#: Largest number of entries of one (block x n) slab held at a time by blocked products.
SLAB_ENTRIES = 1 << 22


def squared_distances(xp, U, V):
    """Squared Euclidean distances between the rows of U and V, (n, n'), clipped at 0.

    O(n n' d). Used by the base-kernel Gram matrices and the discrepancies. The differences are
    formed coordinate by coordinate, not by the ||u||^2 + ||v||^2 - 2 u.v expansion, which
    cancels catastrophically for points far from the origin (X + 1e8) and near the diagonal;
    so the result is invariant to a shift of the data.
    """
    q = xp.zeros((U.shape[0], V.shape[0]), dtype=U.dtype, device=aa.device_of(U))
    for c in range(U.shape[1]):
        diff = U[:, c : c + 1] - V[:, c][None, :]
        q = q + diff * diff
    return q

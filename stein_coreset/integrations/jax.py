"""Scores of a JAX log density (NumPyro, BlackJAX) at many points, for :func:`compress`.

JAX is imported lazily; ``import stein_coreset`` never needs it.
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["scores_from_logdensity", "float64_mode"]


def float64_mode(enable: bool = True):
    """JAX's float64 mode for a ``with`` block, without changing the global config.

    Parameters
    ----------
    enable : bool
        ``False`` gives a context that changes nothing.

    Returns
    -------
    context manager

    Notes
    -----
    Everything a computation needs should be created inside the block: a function traced or
    a ``jax.flatten_util.ravel_pytree`` unravel made outside keeps the 32-bit types of its
    constants, and mixing them with 64-bit ones is what fails (``lax.add requires arguments
    to have the same dtypes, got int32, int64``).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from stein_coreset.integrations.jax import float64_mode
    >>> with float64_mode():
    ...     print(jnp.ones(2).dtype)
    float64
    """
    import jax

    if not enable:
        return contextlib.nullcontext()
    ctx = getattr(jax, "enable_x64", None)
    if ctx is None:  # older JAX
        from jax.experimental import enable_x64 as ctx
    return ctx(True)


def scores_from_logdensity(logdensity_fn, X, *, batch_size: int | None = None, x64: bool = True):
    """``grad log p`` at each row of X by ``jax.vmap(jax.grad(logdensity_fn))``.

    Parameters
    ----------
    logdensity_fn : callable
        ``(d,) array -> scalar`` log density (up to a constant) of one flat point, in the space
        X lives in (for NumPyro/BlackJAX: the unconstrained one; NumPyro's ``potential_energy``
        is its negative).
    X : (n, d) array
        The points (the sampler's draws, flattened).
    batch_size : int, optional
        Rows per call of the compiled, vectorised gradient (default: all at once).
    x64 : bool
        Evaluate in float64 (default), inside ``jax.enable_x64`` only for this call.

    Returns
    -------
    S : (n, d) float64 NumPy array; NaN/inf are left as they are (``compress`` reports them,
    ``nan_policy="omit"`` drops them).

    Notes
    -----
    Cost: one JIT compilation, then one reverse-mode pass per row, vectorised: O(n) gradient
    evaluations in ``ceil(n / batch_size)`` calls.

    See Also
    --------
    stein_coreset.compress : takes X and these scores.
    stein_coreset.integrations.pymc.trace_scores : the scores of a PyMC model's trace.

    Examples
    --------
    >>> import numpy as np, jax.numpy as jnp
    >>> import stein_coreset as sc
    >>> from stein_coreset.integrations.jax import scores_from_logdensity
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))   # biased for N(0, I)
    >>> S = scores_from_logdensity(lambda x: -0.5 * jnp.sum(x ** 2), X, batch_size=100)
    >>> S.dtype, S.shape, bool(np.array_equal(S, -X))
    (dtype('float64'), (256, 2), True)
    >>> sc.compress(X, S, size=16, method="skt", seed=0).indices.size
    16
    """
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            "scores_from_logdensity needs JAX: pip install jax (or, in the stein_coreset "
            "source tree, pip install -r requirements/jax.txt)"
        ) from exc
    if not callable(logdensity_fn):
        raise TypeError(f"logdensity_fn must be callable, got {type(logdensity_fn).__name__}")
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1:
        raise ValueError(f"X must be a non-empty (n, d) array, got shape {X.shape}")
    n = X.shape[0]
    if batch_size is None:
        batch_size = n
    elif int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    batch_size = int(batch_size)
    with float64_mode(x64):
        grad = jax.jit(jax.vmap(jax.grad(logdensity_fn)))
        parts = [
            np.asarray(grad(jnp.asarray(X[i : i + batch_size])), dtype=np.float64)
            for i in range(0, n, batch_size)
        ]
    S = np.concatenate(parts, axis=0)
    if S.shape != X.shape:
        raise ValueError(
            f"logdensity_fn's gradient has shape {S.shape[1:]} per point, expected ({X.shape[1]},)"
            "; it must take one flat (d,) point and return a scalar"
        )
    return S

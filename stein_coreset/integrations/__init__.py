"""Bridges from probabilistic-programming tools to :func:`stein_coreset.compress`.

Each submodule imports its peer lazily, so ``import stein_coreset`` never needs them:

- :mod:`stein_coreset.integrations.arviz`: ``flatten`` / ``unflatten``, the (n, d) view of an
  ArviZ posterior and back (extra ``arviz``);
- :mod:`stein_coreset.integrations.pymc`: ``compress_trace``, a PyMC trace in, a debiased weighted
  ``InferenceData`` out (extra ``pymc``);
- :mod:`stein_coreset.integrations.jax`: ``scores_from_logdensity`` for JAX log densities
  (NumPyro, BlackJAX).
"""

__all__ = ["arviz", "pymc", "jax"]

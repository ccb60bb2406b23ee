"""Stan's draws as ArviZ groups: a PyStan 3 fit, CmdStan output CSV files, or an ArviZ object.

:func:`fit_groups` gives :func:`stein_coreset.integrations.stan.compress_fit` the ``posterior``,
``sample_stats`` and, when the warm-up was saved, ``warmup_posterior`` and
``warmup_sample_stats`` groups, named as ``az.from_pystan`` names them. Re-exported by
:mod:`stein_coreset.integrations.stan`. xarray is imported lazily.
"""

from __future__ import annotations

import math
import os

import numpy as np

from . import arviz as _az
from .stan_model import StanVariables

__all__ = ["fit_groups", "read_cmdstan_csv", "SAMPLE_STATS"]

#: Stan's sampler statistics and the names ArviZ gives them (as ``az.from_pystan`` does).
SAMPLE_STATS = {
    "lp__": "lp", "accept_stat__": "acceptance_rate", "stepsize__": "step_size",
    "treedepth__": "tree_depth", "n_leapfrog__": "n_steps", "divergent__": "diverging",
    "energy__": "energy",
}


def fit_groups(fit) -> dict:
    """The groups of a Stan fit, as ``az.from_pystan`` / ``az.from_cmdstan`` name them.

    Parameters
    ----------
    fit : stan.fit.Fit, str, os.PathLike, list of paths, arviz.InferenceData, xarray.DataTree
        A PyStan 3 fit, one CmdStan output CSV file per chain, or an ArviZ object holding the
        draws (returned as it is).

    Returns
    -------
    dict of str to xarray.Dataset (or the ArviZ object)
        ``posterior`` (every variable: parameters, transformed parameters, generated
        quantities; dims ``(chain, draw, NAME_dim_0, ...)``), ``sample_stats`` (ArviZ's names:
        ``lp``, ``acceptance_rate``, ``step_size``, ``tree_depth``, ``n_steps``,
        ``diverging``, ``energy``), and ``warmup_posterior`` / ``warmup_sample_stats`` when the
        warm-up was saved.

    See Also
    --------
    read_cmdstan_csv : the CSV reader.

    Examples
    --------
    >>> from stein_coreset.integrations.stan import fit_groups
    >>> fit_groups(3.0)
    Traceback (most recent call last):
    ...
    TypeError: fit: expected a PyStan 3 fit, CmdStan CSV path(s) or an ArviZ object, got float
    """
    if isinstance(fit, (str, os.PathLike)) or (
        isinstance(fit, (list, tuple)) and fit and isinstance(fit[0], (str, os.PathLike))
    ):
        return read_cmdstan_csv(fit)
    if isinstance(fit, dict) or _az.has_group(fit, "posterior"):
        return fit
    if hasattr(fit, "stan_outputs") and hasattr(fit, "constrained_param_names"):
        return _pystan_groups(fit)
    raise TypeError(
        "fit: expected a PyStan 3 fit, CmdStan CSV path(s) or an ArviZ object, got "
        f"{type(fit).__name__}"
    )


def _datasets(params: dict, stats: dict, n_warm: int) -> dict:
    """Variables ``(chain, draw, *shape)`` and Stan's statistics ``(chain, draw)`` -> ArviZ
    groups, the first ``n_warm`` draws of each chain as the warm-up."""
    import xarray as xr

    stats = {SAMPLE_STATS.get(c, c.rstrip("_")): v for c, v in stats.items()}

    def ds(d, warm):
        out = {}
        for name, v in d.items():
            v = v[:, :n_warm] if warm else v[:, n_warm:]
            dims = tuple(f"{name}_dim_{i}" for i in range(v.ndim - 2))
            out[name] = (("chain", "draw") + dims, v)
        out = xr.Dataset(out)
        if "diverging" in out:
            out["diverging"] = out["diverging"].astype(bool)
        return out

    groups = {"posterior": ds(params, False), "sample_stats": ds(stats, False)}
    if n_warm:
        groups["warmup_posterior"] = ds(params, True)
        groups["warmup_sample_stats"] = ds(stats, True)
    return groups


def _pystan_groups(fit) -> dict:
    n_warm = math.ceil(fit.num_warmup * bool(fit.save_warmup) / fit.num_thin)
    n_saved = math.ceil(fit.num_samples / fit.num_thin) + n_warm
    nc = fit.num_chains

    def grid(v, dims):  # fit[name]: (*dims, draws * chains), chains interleaved per draw
        v = np.asarray(v, dtype=np.float64).reshape(tuple(dims) + (n_saved, nc))
        return np.moveaxis(v, (-1, -2), (0, 1))  # (chain, draw, *dims)

    stats = {c: grid(fit[c], ()) for c in fit.sample_and_sampler_param_names}
    params = {name: grid(fit[name], dims)
              for name, dims in zip(fit.param_names, fit.dims, strict=True)}
    return _datasets(params, stats, n_warm)


def read_cmdstan_csv(paths) -> dict:
    """Read CmdStan's sampler output (one CSV file per chain) into ArviZ groups.

    Parameters
    ----------
    paths : str, os.PathLike or list of them
        The output files, one per chain (same program and settings).

    Returns
    -------
    dict of str to xarray.Dataset
        As :func:`fit_groups`: ``posterior``, ``sample_stats``, and with
        ``save_warmup=true`` (``1``) the ``warmup_posterior`` / ``warmup_sample_stats`` groups:
        the rows before the ``# Adaptation terminated`` line.

    Raises
    ------
    ValueError
        When the files do not exist, have no header, or disagree in their columns or lengths.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from stein_coreset.integrations.stan import read_cmdstan_csv
    >>> text = ("# method = sample (Default)\\n#     save_warmup = true\\n"
    ...         "lp__,accept_stat__,theta.1,theta.2\\n-3,0.9,5.0,6.0\\n"
    ...         "# Adaptation terminated\\n# Step size = 0.7\\n-1,0.8,0.1,0.2\\n-1,0.7,0.3,0.4\\n")
    >>> path = os.path.join(tempfile.mkdtemp(), "chain_1.csv")
    >>> _ = open(path, "w").write(text)
    >>> groups = read_cmdstan_csv(path)
    >>> sorted(groups), groups["posterior"]["theta"].shape
    (['posterior', 'sample_stats', 'warmup_posterior', 'warmup_sample_stats'], (1, 2, 2))
    >>> float(groups["warmup_posterior"]["theta"][0, 0, 1])
    6.0
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("paths: no CmdStan CSV file given")
    chains = []
    for p in paths:
        if not os.path.isfile(p):
            raise ValueError(f"paths: {p!r} is not a file")
        header, warm, post, seen_end = None, [], [], False
        with open(p) as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                if line.startswith("#"):
                    if "Adaptation terminated" in line:
                        seen_end = True
                    continue
                if header is None:
                    header = line.split(",")
                    continue
                (post if seen_end else warm).append([float(x) for x in line.split(",")])
        if header is None:
            raise ValueError(f"paths: {p!r} has no CSV header (is it CmdStan's output?)")
        if not seen_end:  # no adaptation (fixed_param, adapt engaged=0): all rows are draws
            warm, post = [], warm
        chains.append((header, np.array(warm).reshape(-1, len(header)),
                       np.array(post).reshape(-1, len(header))))
    header = chains[0][0]
    for p, (h, w, s) in zip(paths, chains, strict=True):
        if h != header or w.shape != chains[0][1].shape or s.shape != chains[0][2].shape:
            raise ValueError(
                f"paths: {p!r} differs from {paths[0]!r} in its columns or number of draws"
            )
    n_warm = chains[0][1].shape[0]
    rows = np.stack([np.concatenate([w, s]) for _, w, s in chains])  # (chain, draw, column)
    nc, nd = rows.shape[:2]
    stats = {c: rows[:, :, j] for j, c in enumerate(header) if c.endswith("__")}
    cols = [j for j, c in enumerate(header) if not c.endswith("__")]
    params = {}
    if cols:
        variables = StanVariables([header[j] for j in cols])
        flat = rows[:, :, cols].reshape(nc * nd, len(cols))
        params = {name: v.reshape((nc, nd) + v.shape[1:])
                  for name, v in variables.from_flat(flat).items()}
    return _datasets(params, stats, n_warm)

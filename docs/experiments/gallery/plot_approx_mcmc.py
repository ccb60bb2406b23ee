"""
Correcting approximate MCMC (SGLD, logistic regression)
=======================================================

Stochastic-gradient Langevin dynamics on a Bayesian logistic regression (d = 5), minibatches
of 32; the full-data scores are computed only at the standard-thinned points (the shape of the
paper's Fig. 2, top).

The figure is drawn from ``approx_mcmc.json``; ``python docs/experiments/approx_mcmc.py``
recomputes it.
"""

import os
import sys

# the experiments' shared code and results are one folder up (sphinx-gallery runs the example
# in its own folder, without __file__)
HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else os.getcwd()
sys.path.insert(0, os.path.dirname(HERE))
from _common import figure, load_json  # noqa: E402

data = load_json("approx_mcmc")
meta = data["meta"]
print(meta["command"], "| commit:", meta.get("commit") or "not recorded")
print(f"{meta['experiment']}: chain n = {meta['n']}, n0 in {meta['n0']}, "
      f"median of {meta['seeds']} runs")

# %%
# KSD and energy distance against the coreset size m, one column per kind of weights.
fig = figure(
    data["results"],
    f"Correcting approximate MCMC: SGLD, logistic regression d = 5, n = {meta['n']} "
    f"(median of {meta['seeds']} runs)",
)

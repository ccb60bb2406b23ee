"""
Correcting for tempering (Gaussian, T = 2)
==========================================

A MALA chain on the tempered target p^(1/2) of a correlated Gaussian (d = 4), with the scores
of p given to the methods (the shape of the paper's Fig. 2, bottom). The input is biased
everywhere, so no burn-in removal helps: standard thinning stays at the input's bias while the
debiased methods keep improving with m.

The figure is drawn from ``tempering.json``; ``python docs/experiments/tempering.py``
recomputes it.
"""

import os
import sys

# the experiments' shared code and results are one folder up (sphinx-gallery runs the example
# in its own folder, without __file__)
HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else os.getcwd()
sys.path.insert(0, os.path.dirname(HERE))
from _common import figure, load_json  # noqa: E402

data = load_json("tempering")
meta = data["meta"]
print(meta["command"], "| commit:", meta.get("commit") or "not recorded")
print(f"{meta['experiment']}: chain n = {meta['n']}, n0 in {meta['n0']}, "
      f"median of {meta['seeds']} runs")

# %%
# KSD and energy distance against the coreset size m, one column per kind of weights.
fig = figure(
    data["results"],
    f"Correcting for tempering: MALA on p^(1/2), correlated Gaussian d = 4, n = {meta['n']} "
    f"(median of {meta['seeds']} runs)",
)

"""
Correcting for burn-in (Goodwin oscillator)
===========================================

One P-MALA chain on the Goodwin ODE posterior (d = 4), started far from the posterior mass,
standard-thinned to n0 points and compressed by each method (the shape of the paper's Fig. 1
and Figs. I.1-I.3). The dashed lines discard a burn-in found from six chains (the "oracle")
and then compress the rest with an unbiased method. KSD is the MMD to P (what the debiased
methods target); the energy distance to a long reference sample is an external check.

The figure is drawn from ``burn_in.json``; ``python docs/experiments/burn_in.py`` recomputes it
(about 10 minutes on 2 cores).
"""

import os
import sys

# the experiments' shared code and results are one folder up (sphinx-gallery runs the example
# in its own folder, without __file__)
HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else os.getcwd()
sys.path.insert(0, os.path.dirname(HERE))
from _common import figure, load_json  # noqa: E402

data = load_json("burn_in")
meta = data["meta"]
print(meta["command"], "| commit:", meta.get("commit") or "not recorded")
print(f"chain n = {meta['n']}, n0 in {meta['n0']}, median of {meta['seeds']} runs, "
      f"burn-in oracle {meta['burn_in_oracle']} states")

# %%
# KSD and energy distance against the coreset size m, one column per kind of weights.
fig = figure(
    data["results"],
    f"Correcting for burn-in: Goodwin oscillator, one P-MALA chain of n = {meta['n']} "
    f"(median of {meta['seeds']} runs; dashed: 6-chain burn-in oracle)",
)

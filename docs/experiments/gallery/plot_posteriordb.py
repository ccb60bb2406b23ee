"""
Real posteriors (posteriordb, 33 targets)
=========================================

Two deliberately biased samplers per posterior (NUTS with 25 warm-up draws kept; P-MALA on
p^(1/2)), each compressed to m = 30 points by st, skt, lskt, sr and sc, against m equally spaced
states of the biased chain (thin) and m draws of the gold-standard reference (ref). Each dot is
one posterior's worst mean error over its entries, in reference-posterior sds (log scale).

The figure is drawn from ``posteriordb.json``; ``python docs/experiments/posteriordb.py``
recomputes it (the tables and the three posteriors where the methods help least are on the
page docs/experiments/posteriordb.md).
"""

import os
import sys

# the experiments' shared code and results are one folder up (sphinx-gallery runs the example
# in its own folder, without __file__)
HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else os.getcwd()
sys.path.insert(0, os.path.dirname(HERE))
from _common import load_json  # noqa: E402
from posteriordb import figure  # noqa: E402

data = load_json("posteriordb")
meta = data["meta"]
print(meta["command"], "| commit:", meta.get("commit") or "not recorded")
print(f"{len(data['results'])} posteriors, n = {meta['n']} states per biased chain, "
      f"m in {meta['sizes']}")

# %%
# Worst mean error at m = 30, one dot per posterior; the bar is the median.
fig = figure(data)

"""A PyMC model with every kind of transform and hand-made traces of it, shared by the PyMC
and result-builder tests (PyMC 5 + ArviZ 0.x or PyMC 6 + ArviZ >= 1.1)."""

import arviz as az
import numpy as np
import pymc as pm

from stein_coreset.integrations.arviz import arviz_major, get_group, has_group, to_idata

ARVIZ_1 = arviz_major() >= 1


def from_dict(**groups):
    """az.from_dict for ArviZ 0.x (groups as keywords) and 1.x (one dict)."""
    if ARVIZ_1:
        return az.from_dict(groups, save_warmup=True)
    return az.from_dict(**groups, save_warmup=True)


def map_groups(idata, f):
    names = [g for g in ("posterior", "warmup_posterior") if has_group(idata, g)]
    return to_idata({g: f(get_group(idata, g)) for g in names}, like=idata)

def constrained_model():
    """A positive (HalfNormal), two bounded (Beta, Uniform with a random bound), a simplex
    (Dirichlet) and a matrix-valued free variable, plus a deterministic."""
    with pm.Model() as model:
        s = pm.HalfNormal("s", 1.0)
        b = pm.Beta("b", 2.0, 3.0)
        u = pm.Uniform("u", -1.0, s + 1.0)  # a transform whose bounds depend on another RV
        p = pm.Dirichlet("p", np.ones(3))
        W = pm.Normal("W", 0.0, s, shape=(2, 3))
        pm.Deterministic("t", W.sum() * p[0])
        pm.Normal("y", W.sum() * p[0] + b + u, 1.0, observed=np.array([0.3, 0.5]))
    return model


def random_trace(rng, chains=2, draws=6, warmup=4):
    def group(nd):
        p = rng.dirichlet(np.ones(3), size=(chains, nd))
        W = rng.normal(size=(chains, nd, 2, 3))
        return {
            "s": rng.gamma(2.0, 0.5, size=(chains, nd)),
            "b": rng.uniform(0.05, 0.95, size=(chains, nd)),
            "u": rng.uniform(-0.9, 0.95, size=(chains, nd)),  # below s + 1 > 1
            "p": p,
            "W": W,
            "t": W.sum(axis=(2, 3)) * p[..., 0],
        }

    return from_dict(posterior=group(draws), warmup_posterior=group(warmup))

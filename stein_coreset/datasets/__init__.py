"""Simulated biased MCMC output with exact scores: the demo's and the experiments' test beds.

- :class:`Goodwin`: the posterior over the four log-parameters of the Goodwin oscillator (an ODE
  model of oscillatory enzymatic control), fitted to synthetic data generated from known
  parameters. This is the burn-in test bed of the paper (Sec. 5, App. I.3), after Riabiz et al.
  (2022, Sec. 4.1); the ODE and its sensitivity equations are solved with
  ``scipy.integrate.odeint``.
- :class:`GaussianMixture`: a 2-D Gaussian mixture with analytic scores and exact draws.
- :class:`Gaussian`: a correlated Gaussian (the tempering test bed: ``temper(T)`` is p^{1/T}).
- :class:`LogisticRegression`: a Bayesian logistic regression on generated data, with full-data
  and minibatch scores (the approximate-MCMC test bed of :func:`sgld`).
- :func:`mala`: the (preconditioned) Metropolis-adjusted Langevin algorithm, which records the
  score at every state, so a chain comes with the ``S`` that ``compress`` needs at no extra cost.
- :func:`goodwin_chain`, :func:`gmm_chain`: a single biased chain (long burn-in from a start far
  from the posterior mass) and a long reference sample, as one :class:`Chain`.

Everything here is host-side NumPy: MCMC is sequential and the ODE solver is SciPy's.
The package holds the targets (:mod:`.targets`), the samplers (:mod:`.samplers`), the test-bed
chains (:mod:`.chains`) and the burn-in estimates (:mod:`.burn_in`), one job each.
"""

from .burn_in import burn_in_oracle
from .chains import GOODWIN_START as GOODWIN_START  # the constants stay importable here
from .chains import gmm_chain, goodwin_chain
from .samplers import Chain, mala, sgld
from .targets import GOODWIN_THETA as GOODWIN_THETA
from .targets import Gaussian, GaussianMixture, Goodwin, LogisticRegression

__all__ = [
    "Chain",
    "Goodwin",
    "GaussianMixture",
    "Gaussian",
    "LogisticRegression",
    "mala",
    "sgld",
    "goodwin_chain",
    "gmm_chain",
    "burn_in_oracle",
]

"""Minimum Stein discrepancy estimators (Barp et al., NeurIPS 2019).

``fit(model, X, discrepancy=..., optimizer=...)`` minimises a Stein discrepancy between the
sample X and an unnormalised model p_theta: KSD / DKSD (U-statistics, Eq. 7; the Stein kernel of
:mod:`stein_coreset.kernels` generalised to diffusion matrices and matrix kernels), SM (Eq. 8),
DSM (Eq. 11) and NNSM, with Riemannian SGD (Eq. 16), SGD, L-BFGS or the exact quadratic solution
for exponential families; ``select_lengthscale`` compares kernel lengthscales by held-out loss.
"""

from .estimator import NotFittedError, SteinEstimator
from .fit import OPTIMIZERS, FitResult, fit
from .losses import (
    DISCREPANCIES,
    DiagonalKernel,
    Diffusion,
    SeparableKernel,
    information,
    loss,
    loss_and_grad,
)
from .models import (
    ExponentialFamily,
    Gaussian,
    GeneralizedGamma,
    StudentT,
    SymmetricBessel,
    intractable_model,
    sample_intractable,
)
from .select import LengthscaleSelection, select_lengthscale

__all__ = [
    "fit",
    "FitResult",
    "select_lengthscale",
    "LengthscaleSelection",
    "SteinEstimator",
    "NotFittedError",
    "loss",
    "loss_and_grad",
    "information",
    "Diffusion",
    "SeparableKernel",
    "DiagonalKernel",
    "Gaussian",
    "StudentT",
    "GeneralizedGamma",
    "SymmetricBessel",
    "ExponentialFamily",
    "intractable_model",
    "sample_intractable",
    "DISCREPANCIES",
    "OPTIMIZERS",
]

"""Minimum Stein discrepancy estimators (Barp et al., NeurIPS 2019).

``fit(model, X, discrepancy=..., optimizer=...)`` minimises a Stein discrepancy between the
sample X and an unnormalised model p_theta: KSD / DKSD (U-statistics, Eq. 7; the Stein kernel of
:mod:`stein_coreset.kernels` generalised to diffusion matrices and matrix kernels), SM (Eq. 8),
DSM (Eq. 11) and NNSM, with Riemannian SGD (Eq. 16), SGD, L-BFGS or the exact quadratic solution
for exponential families; ``select_lengthscale`` compares kernel lengthscales by held-out loss.
"""

from .estimator import NotFittedError, SteinEstimator
from .exponential_family import ExponentialFamily, intractable_model, sample_intractable
from .fit import OPTIMIZERS, fit
from .losses import (
    DISCREPANCIES,
    DiagonalKernel,
    Diffusion,
    SeparableKernel,
    information,
    loss,
    loss_and_grad,
)
from .models import Gamma, Gaussian, GeneralizedGamma, StudentT, SymmetricBessel
from .result import FitResult, IdentifiabilityWarning, StandardErrorWarning
from .select import LengthscaleSelection, select_lengthscale

__all__ = [
    "fit",
    "FitResult",
    "StandardErrorWarning",
    "IdentifiabilityWarning",
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
    "Gamma",
    "ExponentialFamily",
    "intractable_model",
    "sample_intractable",
    "DISCREPANCIES",
    "OPTIMIZERS",
]

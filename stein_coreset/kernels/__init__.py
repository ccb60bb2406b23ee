"""Base kernels and the Stein kernel k_p; binding one to points gives the kernel matrix.

Base kernels are radial in the M-norm, k(x, y) = kappa(||x - y||_M^2) with
||x - y||_M^2 = (x - y)^T M^{-1} (x - y). The Stein kernel (Def. 1, Prop. B.5) of a radial base is

    k_p(x, y) = kappa <s_x, M s_y> - 2 kappa' <x - y, s_x - s_y> - 4 q kappa'' - 2 d kappa',

evaluated in O(d) per entry after whitening once (App. I.1): with M = L L^T, u = L^{-1} x and
t = L^T s: q = ||u_x - u_y||^2, <s_x, M s_y> = <t_x, t_y> and
<x - y, s_x - s_y> = <u_x - u_y, t_x - t_y>.

:meth:`SteinKernel.bind` (the Stein kernel at (X, S)) and :func:`centred_kernel_matrix` (a base
kernel centred at the input, for the unbiased baselines, paper footnote 2) give the
:class:`~stein_coreset.engine.KernelMatrix` every algorithm reads k_P through; the engine
(:mod:`stein_coreset.engine`) evaluates it. The compiled backends know exactly :class:`IMQ`,
:class:`Gaussian` and :class:`Matern` (registered with
:func:`~stein_coreset.engine.compiled_kernel`).
"""

from .bandwidth import median_bandwidth
from .radial import IMQ, Gaussian, Matern, RadialKernel
from .stein import DEFAULT_KERNEL, SteinKernel, centred_kernel_matrix

__all__ = [
    "RadialKernel",
    "IMQ",
    "Gaussian",
    "Matern",
    "SteinKernel",
    "DEFAULT_KERNEL",
    "median_bandwidth",
    "centred_kernel_matrix",
]

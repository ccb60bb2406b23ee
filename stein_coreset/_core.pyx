# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Thin wrapper of the C++ core: contiguous float64 / int64 memoryviews in, GIL released."""

import numpy as np

from libc.stdint cimport int64_t


cdef class Kernel:
    """Host-side handle on a P-mean-zero kernel over n whitened points (see stein_kernel.hpp).

    Parameters
    ----------
    base : int
        0 IMQ, 1 Gaussian, 2 Matern(1.5), 3 Matern(2.5).
    U : (n, d) float64, whitened points L^{-1} x.
    T : (n, d) float64 or None, whitened scores L^T s (None: base kernel, no Stein part).
    mean : (n,) float64 or None, centring vector; mean_all its constant.
    """

    def __init__(self, int base, double sigma, double beta, const double[:, ::1] U,
                 T=None, mean=None, double mean_all=0.0):
        cdef const double[:, ::1] Tv
        cdef const double[::1] mv
        if base < 0 or base > 3:
            raise ValueError(f"unknown base kernel code {base}")
        self._keep = [U]
        self.spec.base = base
        self.spec.sigma = sigma
        self.spec.beta = beta
        self.spec.n = U.shape[0]
        self.spec.d = U.shape[1]
        self.spec.U = &U[0, 0]
        self.spec.T = NULL
        self.spec.mean = NULL
        self.spec.mean_all = mean_all
        if T is not None:
            Tv = T
            if Tv.shape[0] != U.shape[0] or Tv.shape[1] != U.shape[1]:
                raise ValueError("T must have the shape of U")
            self._keep.append(T)
            self.spec.T = &Tv[0, 0]
        if mean is not None:
            mv = mean
            if mv.shape[0] != U.shape[0]:
                raise ValueError("mean must have one entry per point")
            self._keep.append(mean)
            self.spec.mean = &mv[0]

    @property
    def n(self):
        return self.spec.n

    @property
    def d(self):
        return self.spec.d


def gram(Kernel K, const int64_t[::1] rows, cols=None):
    """(len(rows), len(cols) or n) block of the kernel matrix."""
    cdef const int64_t[::1] cv
    cdef int64_t nr = rows.shape[0], nc, i
    cdef const int64_t* cptr = NULL
    for i in range(nr):
        if rows[i] < 0 or rows[i] >= K.spec.n:
            raise IndexError(f"row index {rows[i]} out of range for n = {K.spec.n}")
    if cols is None:
        nc = K.spec.n
    else:
        cv = cols
        nc = cv.shape[0]
        for i in range(nc):
            if cv[i] < 0 or cv[i] >= K.spec.n:
                raise IndexError(f"column index {cv[i]} out of range for n = {K.spec.n}")
        if nc > 0:
            cptr = &cv[0]
    out = np.empty((nr, nc), dtype=np.float64)
    cdef double[:, ::1] ov = out
    if nr == 0 or nc == 0:
        return out
    with nogil:
        sc_gram(K.spec, &rows[0], nr, cptr, nc, &ov[0, 0])
    return out


def diag(Kernel K):
    out = np.empty(K.spec.n, dtype=np.float64)
    cdef double[::1] ov = out
    with nogil:
        sc_diag(K.spec, &ov[0])
    return out


def matvec(Kernel K, const double[::1] w):
    if w.shape[0] != K.spec.n:
        raise ValueError(f"w must have length n = {K.spec.n}")
    out = np.empty(K.spec.n, dtype=np.float64)
    cdef double[::1] ov = out
    with nogil:
        sc_matvec(K.spec, &w[0], &ov[0])
    return out


def recombination(const double[:, ::1] A, const double[::1] x0):
    """x >= 0 with A x = A x0 and at most rank(A) <= m nonzeros (Alg. G.1); A is (m, n)."""
    cdef int64_t m = A.shape[0], n = A.shape[1]
    if x0.shape[0] != n:
        raise ValueError(f"x0 must have length n = {n}, got {x0.shape[0]}")
    out = np.zeros(n, dtype=np.float64)
    cdef double[::1] ov = out
    if n == 0:
        return out
    cdef const double* aptr = &A[0, 0] if m > 0 else NULL
    with nogil:
        sc_recombination(aptr, m, n, &x0[0], &ov[0])
    return out


def kt_swap_ls(Kernel K, double[::1] w, const int64_t[::1] order, int fmt):
    """KT-Swap-LS (Alg. G.2) in place on the dense weights w; returns the tracked w^T K w."""
    cdef int64_t s = order.shape[0], i
    cdef double D
    if w.shape[0] != K.spec.n:
        raise ValueError(f"w must have length n = {K.spec.n}")
    if fmt != 0 and fmt != 1:
        raise ValueError("fmt must be 0 (simplex) or 1 (constant-preserving)")
    for i in range(s):
        if order[i] < 0 or order[i] >= K.spec.n:
            raise IndexError(f"index {order[i]} out of range for n = {K.spec.n}")
    if s == 0:
        return float(np.dot(w, matvec(K, w)))
    with nogil:
        D = sc_kt_swap_ls(K.spec, &w[0], &order[0], s, fmt)
    return D

# Declarations of the C++ core in src_cpp/ (plain C++17, no Python headers).
from libc.stdint cimport int64_t


cdef extern from "stein_kernel.hpp" nogil:
    cdef cppclass KernelSpec "sc::KernelSpec":
        int base
        double sigma
        double beta
        int64_t n
        int64_t d
        const double* U
        const double* T
        const double* mean
        double mean_all

    double sc_eval "sc::eval"(const KernelSpec& K, int64_t i, int64_t j)
    void sc_gram "sc::gram"(const KernelSpec& K, const int64_t* rows, int64_t nr,
                            const int64_t* cols, int64_t nc, double* out) except +
    void sc_diag "sc::diag"(const KernelSpec& K, double* out) except +
    void sc_matvec "sc::matvec"(const KernelSpec& K, const double* w, double* out) except +


cdef extern from "dksd.hpp" nogil:
    cdef cppclass DKSDSpec "sc::DKSDSpec":
        int64_t n
        int64_t d
        const double* U
        const double* V
        const double* F
        bint full
        const int* base
        const double* sigma
        const double* beta
        const double* lam

    double sc_dksd_pass "sc::dksd_pass"(const DKSDSpec& S, double* Gv, double* Gf) except +


cdef class Kernel:
    cdef KernelSpec spec
    cdef object _keep

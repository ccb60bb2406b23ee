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


cdef class Kernel:
    cdef KernelSpec spec
    cdef object _keep


cdef extern from "recombination.hpp" nogil:
    int64_t sc_recombination "sc::recombination"(const double* A, int64_t m, int64_t n,
                                                 const double* x0, double* x) except +


cdef extern from "kt_swap_ls.hpp" nogil:
    double sc_kt_swap_ls "sc::kt_swap_ls"(const KernelSpec& K, double* w, const int64_t* order,
                                          int64_t s, int fmt) except +

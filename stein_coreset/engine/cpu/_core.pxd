# Declarations of the C++ core in src_cpp/ (plain C++17, no Python headers).
from libc.stdint cimport int64_t, uint64_t
from libcpp.string cimport string
from libcpp.vector cimport vector


cdef extern from "stein_kernel.hpp" nogil:
    # the base kernels of engine/shared/base_kernels.inc: kBaseKernels[0 .. kNumBaseKernels - 1]
    cdef struct BaseKernelName "sc::BaseKernelName":
        const char* name
        int code
    const BaseKernelName* sc_base_kernels "sc::kBaseKernels"
    const int sc_num_base_kernels "sc::kNumBaseKernels"

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
        const double* Us
        const double* Ts
        int64_t scap
    int64_t sc_soa_capacity "sc::soa_capacity"(int64_t n)



cdef extern from "parallel.hpp" nogil:
    int sc_omp_max_threads "sc::omp_max_threads"()
    int sc_team_members "sc::team_members"(int nt, double step_ns, int64_t nchunks, int64_t nsteps)
    double sc_team_probe_step_ns "sc::team_probe_step_ns"(int members, int64_t nsteps, int64_t chunk_units)
    double sc_team_probe_wake_ns "sc::team_probe_wake_ns"(int members, int reps)
    cdef cppclass RegionStats "sc::RegionStats":
        int64_t regions, steps, chunks
        double wall_ns, busy_ns, combine_ns
    cdef cppclass SiteStats "sc::SiteStats":
        string site
        bint loop
        int team, members
        bint nested
        RegionStats s
    void sc_team_stats_enable "sc::team_stats_enable"(bint on)
    vector[SiteStats] sc_team_stats_take "sc::team_stats_take"()


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

    double sc_dksd_pass "sc::dksd_pass"(const DKSDSpec& S, double* Gv, double* Gf,
                                        int n_threads) except +


cdef class Kernel:
    cdef KernelSpec spec
    cdef object _keep
    cdef object _soa_U
    cdef object _soa_T


cdef extern from "recombination.hpp" nogil:
    int64_t sc_recombination "sc::recombination"(const double* A, int64_t m, int64_t n,
                                                 const double* x0, double* x,
                                                 int n_threads) except +
    int64_t sc_recombination_strided "sc::recombination_strided"(
        const double* A, int64_t m, int64_t n, int64_t rs, int64_t cs, const double* x0,
        double* x, int n_threads) except +


cdef extern from "simplex_qp.hpp" nogil:
    int64_t sc_simplex_qp "sc::simplex_qp"(const double* K, int64_t p, const double* w0,
                                           int64_t max_iter, double* out) except +
    bint sc_affine_weights "sc::affine_weights"(const double* K, int64_t p,
                                                double* out) except +


cdef extern from "kt_swap_ls.hpp" nogil:
    double sc_kt_swap_ls "sc::kt_swap_ls"(const KernelSpec& K, double* w, const int64_t* order,
                                          int64_t s, int fmt, int n_threads) except +


cdef extern from "stein_thinning.hpp" nogil:
    void sc_stein_thinning "sc::stein_thinning"(const KernelSpec& K, int64_t m, int64_t* out,
                                               double* score, int n_threads,
                                               double cache_bytes) except +
    double sc_column_cache_bytes "sc::column_cache_bytes"(int64_t n, int64_t m, int64_t d)


cdef extern from "kt_split.hpp" nogil:
    int64_t sc_kt_split_size "sc::kt_split_size"(int64_t N, int t)
    bint sc_kt_split_pairs_together "sc::kt_split_pairs_together"(int n_threads, int64_t ncore,
                                                                 int64_t half, int64_t d)
    void sc_kt_split "sc::kt_split"(const KernelSpec& K, const int64_t* idx, int64_t N, int t,
                                    double delta, uint64_t seed, const double* uniforms,
                                    int64_t* out, int n_threads) except +
    void sc_kt_split_uniforms "sc::kt_split_uniforms"(int64_t N, int t, uint64_t seed,
                                                      double* out)
    void sc_kt_halvings "sc::kt_halvings"(const KernelSpec& K, const int64_t* blocks, int64_t B,
                                          int64_t N, double delta, const uint64_t* seeds,
                                          int64_t* out, int n_threads) except +


cdef extern from "kt_swap.hpp" nogil:
    void sc_coreset_sums "sc::coreset_sums"(const KernelSpec& K, const int64_t* C, int64_t L,
                                            int64_t m, double* out, int n_threads) except +
    int64_t sc_kt_swap_refine "sc::kt_swap_refine"(const KernelSpec& K, int64_t* I, int64_t m,
                                                   int passes, int n_threads,
                                                   bint sorted_sweeps) except +


cdef extern from "soa_kernel.hpp" nogil:
    void sc_soa_matvec_sym "sc::soa_matvec_sym"(const KernelSpec& K, const double* w,
                                                 double* out, int n_threads) except +
    int64_t sc_soa_matvec_slots "sc::soa_matvec_slots"(int64_t n)
    double sc_soa_quad "sc::soa_quad"(const KernelSpec& K, const double* w,
                                       int n_threads) except +
    void sc_soa_matvec "sc::soa_matvec"(const KernelSpec& K, const double* w, double* out,
                                        int n_threads) except +
    void sc_gram "sc::gram"(const KernelSpec& K, const int64_t* rows, int64_t nr,
                            const int64_t* cols, int64_t nc, double* out, int n_threads) except +
    void sc_kernel_column "sc::kernel_column"(const KernelSpec& K, int64_t j, double* out,
                                              int n_threads) except +
    void sc_kernel_row_means "sc::kernel_row_means"(const KernelSpec& K, const int64_t* rows,
                                                    int64_t nr, double* out,
                                                    int n_threads) except +


cdef extern from "amd.hpp" nogil:
    void sc_amd_lowrank "sc::amd_lowrank"(const float* F, const double* res, int64_t n,
                                          int64_t r, int64_t t0, int64_t steps, double eta,
                                          double* w, double* v, int n_threads) except +
    void sc_lowrank_residual "sc::lowrank_residual"(const double* F, int64_t si, int64_t sk,
                                                    int64_t n, int64_t r, const double* diag,
                                                    double* res, int n_threads) except +
    int sc_factor32 "sc::factor32"(const double* F, int64_t si, int64_t sk, int64_t n,
                                   int64_t r, float* G, int n_threads) except +
    double sc_lowrank_quad "sc::lowrank_quad"(const double* F, int64_t si, int64_t sk,
                                              const double* res, int64_t n, int64_t r,
                                              const double* c, const int64_t* idx, int64_t m,
                                              int n_threads) except +


cdef extern from "pairwise.hpp" nogil:
    void sc_pairwise_sq_distances "sc::pairwise_sq_distances"(const double* U, int64_t m,
                                                              int64_t d, double* q,
                                                              int n_threads) except +
    double sc_median_pairwise_distance "sc::median_pairwise_distance"(
        const double* U, int64_t m, int64_t d, int n_threads, int select) except +


cdef extern from "score_field.hpp" nogil:
    int64_t sc_score_field_rows "sc::score_field_rows"(
        const double* X, const double* S, int64_t k, int64_t d, int64_t no_prev, int64_t* keep,
        int64_t* counts) except +
    void sc_score_field_figures "sc::score_field_figures"(
        const double* X, const double* S, const int64_t* keep, int64_t m, int64_t d,
        const int64_t* q, int64_t nq, const int64_t* part, int64_t K, bint whiten, int64_t* nn,
        double* figures) except +


cdef extern from "stein_moments.hpp" nogil:
    void sc_stein_moments "sc::stein_moments"(const double* X, const double* S, const double* w,
                                              int64_t n, int64_t d, double* moments,
                                              double* out) except +


cdef extern from "rpcholesky.hpp" nogil:
    int64_t sc_weighted_rpcholesky "sc::weighted_rpcholesky"(
        const KernelSpec& K, const double* sw, double* d, double* Ft, int64_t rank,
        int64_t* pivots, int64_t i0, int64_t i1, const double* u, double tol,
        int n_threads) except +


cdef extern from "cancel.hpp" nogil:
    int64_t sc_call_begin "sc::call_begin"(int64_t scope, bint main_thread, bint preset) except +
    void sc_call_end "sc::call_end"(int64_t handle)
    int64_t sc_cancel_scope "sc::cancel_scope"(int64_t scope) except +
    bint sc_scope_cancelled "sc::scope_cancelled"(int64_t scope) except +
    int64_t sc_cancel_all "sc::cancel_all"() except +
    bint sc_any_cancel_requested "sc::any_cancel_requested"() except +
    bint sc_sigint_hook_install "sc::sigint_hook_install"()
    void sc_sigint_hook_remove "sc::sigint_hook_remove"()


cdef extern from "progress.hpp" nogil:
    int64_t sc_progress_read "sc::progress_read"()
    void sc_progress_reset "sc::progress_reset"()

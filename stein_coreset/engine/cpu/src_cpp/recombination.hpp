// Recombination (Alg. G.1; Tchernychova 2016, Alg. 1): Caratheodory reduction of a
// non-negative vector.
//
// Given A (m x n, row-major) with one row positive on the support of x0 and x0 >= 0, find
// x >= 0 with A x = A x0 and at most rank(A) <= m nonzeros. The support is split into 2m
// blocks, each block is collapsed to one column A_{:,I} x_I, the m x 2m problem is reduced
// exactly by Find-BFS (O(m^3)), and the surviving blocks keep their (rescaled) weights: the
// support halves per round, so the total is O(m n + m^3 log(n / m)).
//
// Find-BFS works with an orthonormal basis of the null space (Householder QR of A^T with
// column pivoting on the row-equilibrated matrix), moves x along one basis vector until a
// coordinate hits zero (the ratio test), and restricts the remaining basis to that coordinate
// being zero by one Householder reflection across the basis vectors, so the basis stays
// orthonormal and each step costs O(m N).
//
// n_threads: one team for the call. The QR's column updates, the null vectors, Find-BFS's
// reflections and the collapse run in fixed chunks (each entry summed by one member in the
// serial order), so the result does not depend on the number of threads.
#pragma once

#include <cstdint>

namespace sc {

// x (n, output) >= 0 with A x = A x0 and at most min(m, rank A) nonzeros (exactly zero
// elsewhere). Returns the number of nonzeros. A is m x n row-major; x0 >= 0 (entries <= 0 are
// treated as absent). The all-positive row of the paper guarantees that every null vector has
// a positive entry; moving along -v when v has none makes the routine valid without it (then
// A x = A x0 still holds, but sum(x) need not equal sum(x0)).
int64_t recombination(const double* A, int64_t m, int64_t n, const double* x0, double* x,
                      int n_threads = 1);

// The same with A(r, j) = A[r * rs + j * cs]: rs = n, cs = 1 is row-major (m x n); rs = 1,
// cs = m is points-major (n x m row-major, one contiguous row of test functions per point).
int64_t recombination_strided(const double* A, int64_t m, int64_t n, int64_t rs, int64_t cs,
                              const double* x0, double* x, int n_threads = 1);

// Find-BFS (the inner routine of Alg. G.1) on a small m x N row-major matrix B (overwritten:
// its rows are rescaled) and x (N, in/out, >= 0). Returns the number of nonzeros of x.
int64_t find_bfs(double* B, int64_t m, int64_t N, double* x, int n_threads = 1);

}  // namespace sc

// Vectorisable evaluation of k_P between one query point and many points stored in
// structure-of-arrays layout (coordinate c of slot b at U[c * cap + b]): the library's one
// evaluator. The loop over points is contiguous and SIMD-friendly; it is the inner loop of
// Stein thinning, KT-SPLIT, KT-Swap, the Gram blocks, the columns and the products.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "stein_kernel.hpp"

namespace sc {

// A read-only structure-of-arrays view of `cap` slots.
struct SoAView {
    int64_t d, cap;
    const double* U;     // d x cap
    const double* T;     // d x cap or nullptr
    const double* mean;  // cap or nullptr
};

// An owned structure-of-arrays copy of some of K's points (a subset, or the growing children
// of a halving).
struct SoAPoints {
    int64_t d = 0, cap = 0;
    bool stein = false, centred = false;
    std::vector<double> U, T, mean;

    SoAPoints() = default;
    SoAPoints(const KernelSpec& K, int64_t capacity) { init(K, capacity); }

    void init(const KernelSpec& K, int64_t capacity) {
        d = K.d;
        cap = soa_capacity(capacity);  // the stride: >= capacity, off multiples of 4 KiB
        stein = K.T != nullptr;
        centred = K.mean != nullptr;
        U.assign(static_cast<size_t>(d * cap), 0.0);
        if (stein) T.assign(static_cast<size_t>(d * cap), 0.0);
        if (centred) mean.assign(static_cast<size_t>(cap), 0.0);
    }
    // slot b <- point i of K
    void set(int64_t b, const KernelSpec& K, int64_t i) {
        for (int64_t c = 0; c < d; ++c) U[static_cast<size_t>(c * cap + b)] = K.U[i * d + c];
        if (stein)
            for (int64_t c = 0; c < d; ++c) T[static_cast<size_t>(c * cap + b)] = K.T[i * d + c];
        if (centred) mean[static_cast<size_t>(b)] = K.mean[i];
    }
    // slots 0..m-1 <- points idx[0..m-1] of K
    void gather(const KernelSpec& K, const int64_t* idx, int64_t m) {
        init(K, m);
        for (int64_t b = 0; b < m; ++b) set(b, K, idx[b]);
    }
    SoAView view() const {
        return SoAView{d, cap, U.data(), stein ? T.data() : nullptr,
                       centred ? mean.data() : nullptr};
    }
};

// All n points of K in order: the cached copy K.Us / K.Ts when the caller built it (the Python
// handle does, once), otherwise a copy made here.
class AllPoints {
public:
    explicit AllPoints(const KernelSpec& K) {
        if (K.Us != nullptr && (K.T == nullptr || K.Ts != nullptr)) {
            v_ = SoAView{K.d, K.scap > 0 ? K.scap : K.n, K.Us, K.T ? K.Ts : nullptr, K.mean};
        } else {
            own_.init(K, K.n);
            for (int64_t i = 0; i < K.n; ++i) own_.set(i, K, i);
            v_ = own_.view();
        }
    }
    const SoAView& view() const { return v_; }

private:
    SoAPoints own_;
    SoAView v_{};
};

constexpr int64_t kSoABlock = 256;

// Number of kSoABlock blocks covering n slots.
inline int64_t soa_blocks(int64_t n) { return (n + kSoABlock - 1) / kSoABlock; }

// out[b - a] = k_P(x_i, slot b) for b in [a, e), e - a <= kSoABlock; i indexes K's points.
void soa_eval(const KernelSpec& K, int64_t i, const SoAView& P, int64_t a, int64_t e,
              double* out);

// out[b - a] = k_P(x_i, slot b), evaluated by any path of the evaluator (one row, rows
// together, a packed block), has the same bits whatever the range [a, e) it lies in: the vector
// steps take a range's last entries zero-padded, never in a scalar tail. A test holds every
// product's entries to the full Gram matrix's.

// Packed slots: each group of kPackLanes slots holds its coordinates contiguously (slot b's
// coordinate c at data[(b / kPackLanes) * gs + c * cs + b % kPackLanes], its score coordinate
// kPackLanes further; cs = 2 kPackLanes with scores, kPackLanes without; gs = d cs). In a view
// slot b's coordinate c is at U[c * cap + b], so a tile of rows against a block would stream
// 2 d runs of a few cache lines each, one per page at large n (at d = 100 the products ran at a
// third of the matrix-product rate): packed, a group is one sequential run.
constexpr int64_t kPackLanes = 8;

// A read-only run of len packed slots from a group boundary (what the tiled evaluator reads).
struct PackedView {
    int64_t d = 0, len = 0, cs = 0, gs = 0;
    const double* data = nullptr;
    bool stein = false;
    const double* mean = nullptr;  // slot b's mean at mean[b], or nullptr
};

// Owned packed slots: the growing children of a halving (set slot by slot), or a block of a
// view repacked for a tile of rows (pack). Slots not set read as zero.
class PackedPoints {
public:
    PackedPoints() = default;
    PackedPoints(const KernelSpec& K, int64_t capacity) { init(K, capacity); }

    void init(const KernelSpec& K, int64_t capacity) {
        shape(K.d, K.T != nullptr, K.mean != nullptr, capacity);
    }
    // slot b <- point i of K
    void set(int64_t b, const KernelSpec& K, int64_t i) {
        double* dst = base() + (b / kPackLanes) * gs_ + b % kPackLanes;
        for (int64_t c = 0; c < d_; ++c) dst[c * cs_] = K.U[i * d_ + c];
        if (stein_)
            for (int64_t c = 0; c < d_; ++c) dst[c * cs_ + kPackLanes] = K.T[i * d_ + c];
        if (centred_) mean_[static_cast<size_t>(b)] = K.mean[i];
    }
    // slots 0..e-a-1 <- slots [a, e) of P, e - a <= kSoABlock; returns view(0, e - a)
    PackedView pack(const SoAView& P, int64_t a, int64_t e);

    // slots [a, e), a a multiple of kPackLanes
    PackedView view(int64_t a, int64_t e) const {
        return PackedView{d_,    e - a, cs_, gs_, base() + (a / kPackLanes) * gs_, stein_,
                          centred_ ? mean_.data() + a : nullptr};
    }
    // group g (slots [g kPackLanes, (g + 1) kPackLanes)) as a view of capacity cs: its
    // coordinate c of slot b is U[c * cs + b], the score's kPackLanes further, as packed
    SoAView group(int64_t g) const {
        const double* u = base() + g * gs_;
        return SoAView{d_, cs_, u, stein_ ? u + kPackLanes : nullptr,
                       centred_ ? mean_.data() + g * kPackLanes : nullptr};
    }

private:
    void shape(int64_t d, bool stein, bool centred, int64_t capacity);

    int64_t d_ = 0, cs_ = 0, gs_ = 0;
    bool stein_ = false, centred_ = false;
    std::vector<double> buf_, mean_;
    size_t off_ = 0;  // buf_'s first 64-byte boundary when shaped (an offset: copies stay valid)
    double* base() { return buf_.data() + off_; }
    const double* base() const { return buf_.data() + off_; }
};

// The products over all pairs (K w, w^T K w, Gram blocks of four rows or more, row means) take
// tiles of 64 rows, kSoARows at a time with their coordinate sums formed together, against one
// block of columns after another, each packed once for the tile.
constexpr int64_t kSoARows = 4;

// kSoARows rows against the slots [from, B.len) of packed slots: out[r * ld + b - from] =
// k_P(x_{rows[r]}, slot b of B).
void soa_eval_rows_packed(const KernelSpec& K, const int64_t* rows, const PackedView& B,
                          int64_t from, double* out, int64_t ld);

// s[r] += e[r * kSoABlock + b] * w[b] (no w: e alone) for b = 0 .. len - 1 in order, r <
// kSoARows: each row's sum in its own order, the rows' chains interleaved (a chain alone waits an
// add's latency per entry, more than an entry costs at small d)
inline void rows_dot(const double* e, const double* w, int64_t len, double* s) {
    double a[kSoARows];
    for (int64_t r = 0; r < kSoARows; ++r) a[r] = s[r];
    if (w != nullptr) {
        for (int64_t b = 0; b < len; ++b)
            for (int64_t r = 0; r < kSoARows; ++r) a[r] += e[r * kSoABlock + b] * w[b];
    } else {
        for (int64_t b = 0; b < len; ++b)
            for (int64_t r = 0; r < kSoARows; ++r) a[r] += e[r * kSoABlock + b];
    }
    for (int64_t r = 0; r < kSoARows; ++r) s[r] = a[r];
}

// Two rows against the slots [a, e) of P: out[r * ld + b - a] = k_P(x_{rows[r]}, slot b)
// (KT-SPLIT's pair against the children its batch has not yet summed).
void soa_eval_rows2(const KernelSpec& K, const int64_t* rows, const SoAView& P, int64_t a,
                    int64_t e, double* out, int64_t ld);

// out[r] = sum_{b < len} k_P(x_{rows[r]}, slot b) for r < nr, each row's entries added one
// after another in slot order: tiles of the rows against each block of P packed once per tile,
// on the calling thread (callers split the rows).
void soa_row_sums(const KernelSpec& K, const int64_t* rows, int64_t nr, const SoAView& P,
                  int64_t len, double* out);

// k_P(x_i, x_j) by the same evaluator (a block of one).
double soa_entry(const KernelSpec& K, int64_t i, int64_t j);

// out = K w over all n points of K (K never formed): O(n^2) evaluations, parallel over rows.
void soa_matvec(const KernelSpec& K, const double* w, double* out, int n_threads);

// out = K w from the upper triangle, K being symmetric: n (n + 1) / 2 evaluations, each entry
// k_ij (j > i) added to out_i and out_j. Rows in chunks of 8 dealt round-robin to
// soa_matvec_slots(n) accumulators of n doubles; a slot takes its chunks in order, and
// out = the slots' sum in slot order, so the values do not depend on n_threads. At most that
// many members work (32: on up to 64 cores the half work on 32 is no slower than the whole on
// all). Callers use it where soa_matvec_slots(n) > 0.
void soa_matvec_sym(const KernelSpec& K, const double* w, double* out, int n_threads);

// The accumulators of soa_matvec_sym at n points: 32, or 0 where 32 n doubles would pass
// kSymMatvecBytes, 32 MiB, i.e. above n = 2^17 (there soa_matvec serves).
int64_t soa_matvec_slots(int64_t n);
constexpr double kSymMatvecBytes = 32.0 * 1024 * 1024;

// w^T K w over all n points from the upper triangle, K being symmetric: sum_i w_i (w_i k_ii +
// 2 sum_{j > i} w_j k_ij), n (n + 1) / 2 evaluations, half of soa_matvec's. Rows in fixed
// chunks whose partial sums are added in order: the value does not depend on n_threads.
double soa_quad(const KernelSpec& K, const double* w, int n_threads);

// The dense front ends of the evaluator.

// out[a * nc + b] = k_P(rows[a], cols[b]); cols == nullptr means all n columns (nc = n).
// A row over all n columns is bit-identical to kernel_column of that row.
void gram(const KernelSpec& K, const int64_t* rows, int64_t nr, const int64_t* cols, int64_t nc,
          double* out, int n_threads);

// out[i] = k_P(x_i, x_i) for all n points.
void diag(const KernelSpec& K, double* out, int n_threads);

// out[i] = k_P(x_i, x_j) for all n points: O(n d), parallel over blocks of points. Equal, bit for
// bit, to the row j of gram(K, {j}, all columns).
void kernel_column(const KernelSpec& K, int64_t j, double* out, int n_threads);

// out[a] = (1/n) sum_j k(x_{rows[a]}, x_j): the input's mean embedding at nr of its points (the
// unbiased KT-Compress++ baseline, Alg. F.3), O(nr n) evaluations (parallel over rows), never an
// nr x n block.
void kernel_row_means(const KernelSpec& K, const int64_t* rows, int64_t nr, double* out,
                      int n_threads);

}  // namespace sc

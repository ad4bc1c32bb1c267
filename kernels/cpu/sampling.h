// Row-wise argmax, top-k and top-p; CPU twins of kernels/cuda/sampling.h (softmax_rows is in
// kernels/cpu/ops.h). Inputs are expected finite.
#pragma once

#include <cstdint>

namespace specchat::cpu {

// ids[r] = index of the largest x[r, :] (lowest index among equal maxima); x [n_rows, n], n >= 1.
void argmax_rows(const float* x, int n_rows, int n, int32_t* ids);

// The index the scan `best = 0; for i: if (x[i] > x[best]) best = i` gives, over x [n] (0 when
// n == 0): the first maximum; a NaN is skipped, except at index 0, where it is returned. Two
// vectorised passes (cloned per ISA): the maximum over 16 lanes, then the first block holding it.
int32_t argmax_row(const float* x, int64_t n);

// True when none of x [n] is infinite or NaN (true for n == 0); one vectorised pass.
bool all_finite(const float* x, int64_t n);

// log Σ_i e^{x[i]} over x [n] (-inf when n == 0 or every x[i] is -inf), in double: the maximum
// m, then Σ e^{x[i] − m} with a 16-lane single-precision exp (vec_exp.h) summed in double lanes,
// m + log of that. Within 1e-6 of the exact value for logits of magnitude up to ~100 (terms
// below e^-87 count as e^-87 against a sum of at least 1). One call costs about what 4 % of
// n std::exp calls did (the drafters' log-probabilities, tree_builder.cpp). Inputs finite or
// -inf.
double logsumexp_row(const float* x, int64_t n);

// ids[r, 0..k), vals[r, 0..k): the k largest x[r, :], value descending, equal values by
// ascending id. 1 <= k <= n, else std::invalid_argument (the device twin also caps k at 64).
void topk_rows(const float* x, int n_rows, int n, int k, int32_t* ids, float* vals);

// Nucleus cut over probs [n_rows, n], rows sorted descending summing to 1: keeps the shortest
// prefix whose running double sum reaches top_p (at least 1 entry; all when top_p >= 1), zeroes
// the rest, divides the kept entries by their (double) sum; n_kept[n_rows] (may be null).
void topp_rows(float* probs, int n_rows, int n, float top_p, int32_t* n_kept);

}  // namespace specchat::cpu

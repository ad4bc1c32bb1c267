// Internal to kernels/cpu: e^x over the 16 lanes of a GCC generic vector (float,
// vector_size(64)), shared by swiglu (ops.cpp) and logsumexp_row (sampling.cpp). A macro, not a
// function: generic vectors must not cross the ABIs of the target_clones variants.
#pragma once

#include <cstdint>

// OUT = e^X lane by lane, Cephes expf: X = n ln 2 + r (|r| <= ln 2 / 2; n rounded to nearest by
// adding and subtracting 1.5 * 2^23), a degree-6 polynomial for e^r, 2^n from the exponent bits.
// Relative error a few ulp against std::exp. X is clamped to [-87, 88] first (e^-87 and e^88
// stay normal and finite), so lanes below -87 give e^-87 ≈ 1.6e-38, not 0. Every lane goes
// through the same operations: a lane's result depends on nothing but its input.
#define SPECCHAT_EXP16(X, OUT)                                                   \
  do {                                                                           \
    typedef int32_t e16_v16i __attribute__((vector_size(64)));                   \
    auto e16_x_ = (X);                                                           \
    e16_x_ = e16_x_ < -87.0f ? decltype(e16_x_){} - 87.0f : e16_x_;              \
    e16_x_ = e16_x_ > 88.0f ? decltype(e16_x_){} + 88.0f : e16_x_;               \
    const auto e16_n_ = (e16_x_ * 1.44269504088896341f + 12582912.0f) - 12582912.0f; \
    auto e16_r_ = e16_x_ - e16_n_ * 0.693359375f;                                \
    e16_r_ = e16_r_ - e16_n_ * -2.12194440e-4f;                                  \
    auto e16_p_ = e16_r_ * 1.9875691500e-4f + 1.3981999507e-3f;                  \
    e16_p_ = e16_p_ * e16_r_ + 8.3334519073e-3f;                                 \
    e16_p_ = e16_p_ * e16_r_ + 4.1665795894e-2f;                                 \
    e16_p_ = e16_p_ * e16_r_ + 1.6666665459e-1f;                                 \
    e16_p_ = e16_p_ * e16_r_ + 5.0000001201e-1f;                                 \
    e16_p_ = e16_p_ * (e16_r_ * e16_r_) + e16_r_ + 1.0f;                         \
    const e16_v16i e16_e_ = (__builtin_convertvector(e16_n_, e16_v16i) + 127) << 23; \
    decltype(e16_x_) e16_s_;                                                     \
    __builtin_memcpy(&e16_s_, &e16_e_, sizeof e16_s_);                           \
    (OUT) = e16_p_ * e16_s_;                                                     \
  } while (0)

// The CUDA quant_matmul kernel's block decoding and per-lane sums (kernels/cuda/quant_blocks.cuh),
// run on the host: every chunk equals the CPU reference dequantizer bit for bit, and the
// kernel's arithmetic matches cpu::linear_ref and is batch-invariant. Runs without a GPU (the
// [cuda] tests hold the same kernel to its CPU twin on a device).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/quant.h"
#include "tests/cuda/host/quant_chunks_host.h"

using namespace specchat;

namespace {

constexpr DType kTypes[] = {DType::q8_0, DType::q4_0, DType::q4_k, DType::q5_k, DType::q6_k};

// n_out rows of n_in values in type t: odd rows random bytes with fixed scales, even rows
// quantized from random floats (real fitted scales and mins).
std::vector<uint8_t> make_weights(DType t, int n_out, int n_in, uint64_t seed) {
  const size_t row = dtype_row_bytes(t, static_cast<uint64_t>(n_in));
  std::vector<uint8_t> w(row * static_cast<size_t>(n_out));
  std::vector<float> src(static_cast<size_t>(n_in));
  for (int j = 0; j < n_out; ++j) {
    uint8_t* dst = w.data() + row * static_cast<size_t>(j);
    if (j % 2 == 1) {
      cpu::random_fill_blocks(dst, t, n_in, seed + static_cast<uint64_t>(j), 0.05f);
    } else {
      cpu::random_fill(src.data(), DType::f32, n_in, seed + static_cast<uint64_t>(j), 1.0f);
      cpu::quantize_row(t, src.data(), dst, n_in);
    }
  }
  return w;
}

}  // namespace

TEST_CASE("cuda quant kernel (host run): every 32-value chunk equals the reference dequantizer", "[unit][quant]") {
  const int n_in = 512, n_out = 6;
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const std::vector<uint8_t> w = make_weights(t, n_out, n_in, 3);
    const size_t row = dtype_row_bytes(t, n_in);
    // A copy one byte off 16-byte alignment for the byte-load path.
    std::vector<uint8_t> shifted(w.size() + 16);
    const size_t off = (16 - reinterpret_cast<uintptr_t>(shifted.data()) % 16) % 16 + 1;
    std::copy(w.begin(), w.end(), shifted.begin() + static_cast<std::ptrdiff_t>(off));
    for (int j = 0; j < n_out; ++j) {
      std::vector<float> want(static_cast<size_t>(n_in));
      cpu::dequantize_row_ref(t, w.data() + row * j, want.data(), n_in);
      for (int c = 0; c < n_in / 32; ++c) {
        float got[32], got_bytes[32];
        test::chunk_values_host(t, true, w.data() + row * j, c, got);
        test::chunk_values_host(t, false, shifted.data() + off + row * j, c, got_bytes);
        for (int l = 0; l < 32; ++l) {
          INFO("row " << j << " chunk " << c << " lane value " << l);
          REQUIRE(got[l] == want[static_cast<size_t>(32 * c + l)]);
          REQUIRE(got_bytes[l] == want[static_cast<size_t>(32 * c + l)]);
        }
      }
    }
  }
}

TEST_CASE("cuda quant kernel (host run): sums match linear_ref and each row is batch-invariant", "[unit][quant]") {
  const int n_in = 768, n_out = 17;  // 24 chunks per row: lanes 24..31 get none
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const std::vector<uint8_t> w = make_weights(t, n_out, n_in, 11);
    std::vector<float> x(static_cast<size_t>(8) * n_in);
    cpu::random_fill(x.data(), DType::f32, static_cast<int64_t>(x.size()), 5, 1.0f);
    std::vector<float> want(static_cast<size_t>(8) * n_out), got(want.size()), one(static_cast<size_t>(n_out));
    cpu::linear_ref(x.data(), w.data(), t, want.data(), 8, n_in, n_out);
    for (bool vec : {true, false}) {
      CAPTURE(vec);
      test::quant_matmul_host(t, vec, x.data(), w.data(), got.data(), 8, n_in, n_out);
      double err = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
        scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
      }
      CHECK(err / scale <= 1e-5);  // the [cuda] tolerance of quant_matmul against its CPU twin
      // Row 5 alone gives the same bits as inside the batch of 8.
      test::quant_matmul_host(t, vec, x.data() + static_cast<size_t>(5) * n_in, w.data(), one.data(), 1, n_in, n_out);
      for (int j = 0; j < n_out; ++j) CHECK(one[static_cast<size_t>(j)] == got[static_cast<size_t>(5 * n_out + j)]);
    }
  }
}

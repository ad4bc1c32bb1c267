// GGUF tensor dequantization (engine/gguf_dequant.cpp): f16 and bf16 from known bit patterns,
// f32 and q8_0 against their values.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "engine/gguf.h"
#include "gguf_outcome.h"
#include "gguf_writer.h"

using namespace specchat;
using specchat::test::GgufBuilder;
namespace gv = specchat::test::gguf_value;

namespace {

constexpr const char* kLabel = "test.gguf";

std::vector<float> dequant(const GgufTensorInfo& t) {
  std::vector<float> out(t.n_elements());
  dequantize_to_f32(t.type, t.data, out.data(), out.size());
  return out;
}

}  // namespace

TEST_CASE("gguf: f16 and bf16 dequantization of known bit patterns", "[unit]") {
  const std::vector<std::pair<uint16_t, float>> known{
      {0x0000, 0.0f}, {0x3C00, 1.0f}, {0xC000, -2.0f}, {0x3555, 0.333251953125f},
      {0x7BFF, 65504.0f}, {0x0400, 6.103515625e-05f}, {0x0001, 5.9604644775390625e-08f},
      {0x03FF, 6.0975551605224609375e-05f}, {0x8001, -5.9604644775390625e-08f},
      {0x7C00, std::numeric_limits<float>::infinity()},
      {0xFC00, -std::numeric_limits<float>::infinity()}};
  for (auto [bits, value] : known) {
    float out = -1;
    dequantize_to_f32(GgmlType::f16, reinterpret_cast<const uint8_t*>(&bits), &out, 1);
    INFO("f16 bits " << bits);
    CHECK(out == value);
  }
  float out = 0;
  const uint16_t neg_zero = 0x8000, nan = 0x7E00, bf_one = 0x3F80, bf_neg = 0xC0A0;
  dequantize_to_f32(GgmlType::f16, reinterpret_cast<const uint8_t*>(&neg_zero), &out, 1);
  CHECK((out == 0.0f && std::signbit(out)));
  dequantize_to_f32(GgmlType::f16, reinterpret_cast<const uint8_t*>(&nan), &out, 1);
  CHECK(std::isnan(out));
  dequantize_to_f32(GgmlType::bf16, reinterpret_cast<const uint8_t*>(&bf_one), &out, 1);
  CHECK(out == 1.0f);
  dequantize_to_f32(GgmlType::bf16, reinterpret_cast<const uint8_t*>(&bf_neg), &out, 1);
  CHECK(out == -5.0f);

  // Every half: writer f32->f16 inverts reader f16->f32 (both converters checked exhaustively).
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> f(all.size());
  dequantize_to_f32(GgmlType::f16, reinterpret_cast<const uint8_t*>(all.data()), f.data(),
                    f.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (std::isnan(f[i])) continue;
    mismatches += test::f32_to_f16(f[i]) != all[i];
  }
  CHECK(mismatches == 0);
  CHECK(test::f32_to_f16(1.0f + 0x1p-11f) == 0x3C00);  // tie rounds to even
  CHECK(test::f32_to_f16(1.0f + 0x3p-11f) == 0x3C02);
  CHECK(test::f32_to_f16(65519.0f) == 0x7BFF);
  CHECK(test::f32_to_f16(65520.0f) == 0x7C00);
  CHECK(test::f32_to_f16(1e-9f) == 0x0000);
}

TEST_CASE("gguf: f32 and q8_0 dequantization", "[unit]") {
  const std::vector<float> values{1.5f, -0.0f, 3e38f, -7.25f};
  std::vector<float> out(4);
  dequantize_to_f32(GgmlType::f32, reinterpret_cast<const uint8_t*>(values.data()), out.data(), 4);
  CHECK(out == values);

  // Two hand-made q8_0 blocks: d = 0.5 (f16 0x3800), q = j - 16; d = -2 (0xC000), q = -128, 127.
  std::vector<uint8_t> blocks;
  GgufBuilder::push_u16(blocks, 0x3800);
  for (int j = 0; j < 32; ++j) blocks.push_back(static_cast<uint8_t>(static_cast<int8_t>(j - 16)));
  GgufBuilder::push_u16(blocks, 0xC000);
  for (int j = 0; j < 32; ++j) blocks.push_back(j % 2 ? 127 : 0x80);  // 0x80 is int8 -128
  REQUIRE(blocks.size() == 68);
  std::vector<float> q(64);
  dequantize_to_f32(GgmlType::q8_0, blocks.data(), q.data(), 64);
  for (int j = 0; j < 32; ++j) {
    CHECK(q[j] == 0.5f * static_cast<float>(j - 16));
    CHECK(q[32 + j] == (j % 2 ? -254.0f : 256.0f));
  }
  CHECK(test::gguf_outcome_of([&] { dequantize_to_f32(GgmlType::q8_0, blocks.data(), q.data(), 33); }).kind ==
        "absurd_value");
  // A hand-made q4_0 block: d = 0.5, byte i = i | (15 − i) << 4 -> x[i] = 0.5 (i − 8),
  // x[i + 16] = 0.5 (7 − i).
  std::vector<uint8_t> q4;
  GgufBuilder::push_u16(q4, 0x3800);
  for (int i = 0; i < 16; ++i) q4.push_back(static_cast<uint8_t>(i | ((15 - i) << 4)));
  dequantize_to_f32(DType::q4_0, q4.data(), q.data(), 32);
  for (int i = 0; i < 16; ++i) {
    CHECK(q[i] == 0.5f * static_cast<float>(i - 8));
    CHECK(q[i + 16] == 0.5f * static_cast<float>(7 - i));
  }
  CHECK(test::gguf_outcome_of([&] { dequantize_to_f32(DType::q6_k, blocks.data(), q.data(), 32); }).kind == "absurd_value");

  // Writer quantization, seeded, 96 values (3 blocks): |x - x'| <= d/2 from rounding q, plus the
  // f16 rounding of d (relative 2^-11, times |q| <= 127) -> bound 0.57 * d per block.
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> x(96);
  for (float& v : x) v = dist(rng);
  GgufBuilder b;
  b.add_tensor_q8_0("q", {32, 3}, x).add_tensor_f16("h", {96}, x);
  const GgufFile f = GgufFile::from_bytes(b.build(), kLabel);
  const std::vector<float> xq = dequant(f.require_tensor("q", {32, 3}));
  const std::vector<float> xh = dequant(f.require_tensor("h"));
  for (size_t blk = 0; blk < 3; ++blk) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
    for (size_t j = 0; j < 32; ++j) {
      const size_t i = blk * 32 + j;
      CHECK(std::fabs(xq[i] - x[i]) <= 0.57f * amax / 127.0f);
      CHECK(std::fabs(xh[i] - x[i]) <= std::fabs(x[i]) * 0x1p-11f + 0x1p-25f);  // f16: half an ulp
    }
  }
}

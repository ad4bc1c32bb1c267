// KvCache (engine/kv_cache.h): f16 and f32 host rows, their byte counts, the write/read
// rounding, path compaction of typed rows, and the refusal of other element types.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/kv_cache.h"
#include "kernels/cpu/convert.h"

using namespace specchat;

TEST_CASE("KvCache: an f16 cache holds half the bytes of an f32 one and rounds rows to nearest even",
          "[unit][kv]") {
  const int n_layer = 3, n_ctx = 10, kv_dim = 12;
  KvCache c32(n_layer, n_ctx, kv_dim, DType::f32), c16(n_layer, n_ctx, kv_dim, DType::f16);
  CHECK(c32.bytes() == 2u * n_layer * n_ctx * kv_dim * 4);
  CHECK(c16.bytes() == 2u * n_layer * n_ctx * kv_dim * 2);
  CHECK(c16.type() == DType::f16);
  // Two rows written at slot 4 from a strided source (stride 15 floats).
  std::vector<float> k(2 * 15), v(2 * 15);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = 0.1f * static_cast<float>(i) - 1.234567f;
    v[i] = 1e-3f * static_cast<float>(i * i) + 70000.0f * (i == 3);  // 70000 overflows f16: inf
  }
  c32.write(1, 4, k.data(), v.data(), 2, 15);
  c16.write(1, 4, k.data(), v.data(), 2, 15);
  for (int r = 0; r < 2; ++r) {
    for (int d = 0; d < kv_dim; ++d) {
      const float kk = k[static_cast<size_t>(r * 15 + d)], vv = v[static_cast<size_t>(r * 15 + d)];
      CHECK(c32.k_at(1, 4 + r, d) == kk);
      CHECK(c32.k(1, 4 + r)[d] == kk);
      CHECK(c16.k_at(1, 4 + r, d) == cpu::f16_to_f32(cpu::f32_to_f16(kk)));
      CHECK(c16.v_at(1, 4 + r, d) == cpu::f16_to_f32(cpu::f32_to_f16(vv)));
      CHECK(std::fabs(c16.k_at(1, 4 + r, d) - kk) <= std::fabs(kk) * 0x1p-11f);
    }
  }
  CHECK(std::isinf(c16.v_at(1, 4, 3)));
  // Untouched rows stay zero; other layers too.
  CHECK(c16.k_at(0, 4, 0) == 0.0f);
  CHECK(c16.k_at(1, 6, 0) == 0.0f);
  // An f16 cache has no f32 row pointers.
  CHECK_THROWS_AS(c16.k(0, 0), std::logic_error);
  CHECK_THROWS_AS(c16.write(0, n_ctx - 1, k.data(), v.data(), 2, 15), std::invalid_argument);
}

TEST_CASE("KvCache: keep_path moves f16 rows like f32 ones", "[unit][kv]") {
  const int n_layer = 2, n_ctx = 12, kv_dim = 8;
  for (const DType t : {DType::f32, DType::f16}) {
    INFO(dtype_name(t));
    KvCache c(n_layer, n_ctx, kv_dim, t);
    const std::vector<int32_t> prefix = {5, 6};
    c.commit(prefix);
    // Five tree nodes after the prefix, row value = 100 * layer + 10 * node + d / 8.
    std::vector<float> k(5 * kv_dim), v(5 * kv_dim);
    for (int il = 0; il < n_layer; ++il) {
      for (int j = 0; j < 5; ++j) {
        for (int d = 0; d < kv_dim; ++d) {
          k[static_cast<size_t>(j * kv_dim + d)] = 100.0f * il + 10.0f * j + d / 8.0f;
          v[static_cast<size_t>(j * kv_dim + d)] = -(100.0f * il + 10.0f * j + d / 8.0f);
        }
      }
      c.write(il, 2, k.data(), v.data(), 5, kv_dim);
    }
    const std::vector<int32_t> path = {0, 2, 4}, ids = {7, 8, 9};
    c.keep_path(path, ids);
    REQUIRE(c.size() == 5);
    for (int il = 0; il < n_layer; ++il) {
      for (int j = 0; j < 3; ++j) {
        for (int d = 0; d < kv_dim; ++d) {
          const float want = 100.0f * il + 10.0f * path[static_cast<size_t>(j)] + d / 8.0f;  // exact in f16
          CHECK(c.k_at(il, 2 + j, d) == want);
          CHECK(c.v_at(il, 2 + j, d) == -want);
        }
      }
    }
  }
}

TEST_CASE("KvCache: element types other than f16 and f32 are refused", "[unit][kv]") {
  CHECK_THROWS_AS(KvCache(1, 4, 8, DType::bf16), std::invalid_argument);
  CHECK_THROWS_AS(KvCache(1, 4, 8, DType::q8_0), std::invalid_argument);
}

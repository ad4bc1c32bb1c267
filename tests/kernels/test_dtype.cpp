// The weight-type vocabulary (kernels/dtype.h): block geometry of ggml's types and the mapping
// to and from the ggml type ids stored in GGUF files.
#include <catch2/catch.hpp>

#include "kernels/dtype.h"

using namespace specchat;

TEST_CASE("weight types: block sizes and bytes follow ggml's layouts", "[unit][kernels][dtype]") {
  CHECK(dtype_row_bytes(DType::f32, 10) == 40);
  CHECK(dtype_row_bytes(DType::f16, 10) == 20);
  CHECK(dtype_row_bytes(DType::bf16, 10) == 20);
  // q8_0: f16 scale + 32 int8; q4_0: f16 scale + 16 bytes of nibbles (ggml-common.h block_q8_0,
  // block_q4_0); k-quants per 256 values: q4_K 2+2+12+128, q5_K 2+2+12+32+128, q6_K 128+64+16+2.
  CHECK(dtype_row_bytes(DType::q8_0, 64) == 68);
  CHECK(dtype_row_bytes(DType::q4_0, 64) == 36);
  CHECK(dtype_row_bytes(DType::q4_k, 512) == 288);
  CHECK(dtype_row_bytes(DType::q5_k, 256) == 176);
  CHECK(dtype_row_bytes(DType::q6_k, 256) == 210);
  CHECK(dtype_is_block(DType::q8_0));
  CHECK_FALSE(dtype_is_block(DType::bf16));
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(dtype_size(DType::q4_k) == 0);  // no per-element size for block types
}

TEST_CASE("weight types: ggml ids map both ways, unknown ids have no type", "[unit][kernels][dtype]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_k, DType::q5_k, DType::q6_k}) {
    INFO(dtype_name(t));
    REQUIRE(dtype_from_ggml(dtype_ggml_id(t)).has_value());
    CHECK(*dtype_from_ggml(dtype_ggml_id(t)) == t);
  }
  CHECK(dtype_ggml_id(DType::q8_0) == 8);
  CHECK(dtype_ggml_id(DType::bf16) == 30);
  CHECK(dtype_ggml_id(DType::q6_k) == 14);
  for (uint32_t id : {3u, 6u, 7u, 9u, 11u, 15u, 29u, 99u}) CHECK_FALSE(dtype_from_ggml(id).has_value());
}

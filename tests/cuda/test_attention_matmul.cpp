// [cuda] attention with the tree mask and the cuBLAS matmul against their CPU twins.
#include <catch2/catch.hpp>

#include "cuda_test_util.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/matmul_typed.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/matmul.h"

using specchat::DType;
using specchat::test::DeviceBuffer;
using specchat::test::normalized_error;
using specchat::test::random_floats;
namespace cpu = specchat::cpu;
namespace gpu = specchat::cuda;

namespace {

struct AttnCase {
  int n_head, n_head_kv, head_dim, n_tokens, kv_pos0, n_prefix;
  std::vector<int> parents;  // tree of the batch tokens (-1: child of the prefix); empty: chain
  bool random_old = false;   // slots [n_prefix, kv_pos0) visible at random (older tree nodes)
};

// Runs one case on both sides; returns the normalized error.
double run_attention(const AttnCase& c) {
  const int n_keys = c.kv_pos0 + c.n_tokens;
  const int n_masked = n_keys - c.n_prefix;
  const int64_t kv_stride = static_cast<int64_t>(c.n_head_kv) * c.head_dim + 5;  // padded rows
  const auto q = random_floats(static_cast<size_t>(c.n_tokens) * c.n_head * c.head_dim, 31, -2, 2);
  const auto k = random_floats(static_cast<size_t>(n_keys * kv_stride), 32, -2, 2);
  const auto v = random_floats(static_cast<size_t>(n_keys * kv_stride), 33);
  std::vector<uint8_t> vis(static_cast<size_t>(c.n_tokens) * n_masked, 0);
  const int old = c.kv_pos0 - c.n_prefix;  // masked slots before the batch
  for (int i = 0; i < c.n_tokens; ++i) {
    uint8_t* row = vis.data() + static_cast<size_t>(i) * n_masked;
    for (int j = 0; j < old; ++j) row[j] = c.random_old ? static_cast<uint8_t>((i * 7 + j * 3) % 2) : 0;
    if (c.parents.empty()) {
      for (int j = 0; j <= i; ++j) row[old + j] = 1;  // chain: causal
    } else {
      for (int a = i; a >= 0; a = c.parents[static_cast<size_t>(a)]) row[old + a] = 1;  // ancestors
    }
  }
  std::vector<float> want(q.size()), scratch(static_cast<size_t>(n_keys));
  cpu::AttentionArgs a{q.data(), k.data(), v.data(), kv_stride, c.kv_pos0, c.n_prefix, c.n_tokens,
                       c.n_head, c.n_head_kv, c.head_dim, vis.data(), want.data(), scratch.data()};
  cpu::attention(a);

  DeviceBuffer<float> dq(q), dk(k), dv(v), dout(q.size());
  DeviceBuffer<uint8_t> dvis(vis);
  gpu::AttentionArgs g{dq.get(), dk.get(), dv.get(), kv_stride, c.kv_pos0, c.n_prefix, c.n_tokens,
                       c.n_head, c.n_head_kv, c.head_dim, dvis.get(), dout.get(), nullptr};
  gpu::attention(g, nullptr);
  const auto got = dout.download();
  REQUIRE(specchat::test::all_finite(got));
  return normalized_error(got, want);
}

}  // namespace

TEST_CASE("cuda attention matches the CPU twin for one token a chain and a tree", "[cuda]") {
  // 1e-5: f32 dot products and sums in a different order over <= 300 keys (the twin sums the
  // softmax denominator in double); a wrong mask or head mapping gives errors near 1.
  const std::vector<int> tree = {-1, 0, 0, 1, 1, 2, -1, 6, 3, 8, 8, 4, 5, 7, 13, 13, 9};  // 17 nodes
  const std::vector<AttnCase> cases = {
      {4, 2, 64, 1, 0, 0, {}},            // first token of a sequence
      {4, 2, 64, 1, 36, 36, {}},          // decode: 37 keys
      {32, 32, 128, 1, 299, 299, {}},     // 7B shape, 300 keys
      {6, 1, 128, 3, 34, 34, {}},         // chain of 3, GQA 6:1
      {4, 2, 64, 17, 283, 283, {}},       // chain of 17, 300 keys
      {4, 2, 64, 17, 20, 20, tree},       // tree of 17 on a 20-token prefix
      {8, 2, 128, 17, 283, 280, tree, true},  // tree with older masked nodes, 300 keys
      {3, 3, 80, 17, 20, 20, tree},       // head_dim not a multiple of 32
      {32, 8, 128, 128, 172, 172, {}},    // 128-token chain (prefill chunk), 300 keys
  };
  for (const AttnCase& c : cases) {
    CAPTURE(c.n_head, c.n_head_kv, c.head_dim, c.n_tokens, c.kv_pos0, c.n_prefix);
    CHECK(run_attention(c) < 1e-5);
  }
}

TEST_CASE("cuda attention refuses shapes beyond its limits", "[cuda]") {
  cpu::AttentionArgs a{};
  a.n_tokens = 1;
  a.n_head = 6;
  a.n_head_kv = 4;
  a.head_dim = 64;
  a.kv_stride = 256;
  CHECK_THROWS_AS(gpu::attention(a, nullptr), std::invalid_argument);  // 6 % 4 != 0
  a.n_head_kv = 3;
  a.kv_pos0 = gpu::attention_max_keys(64);
  a.n_prefix = a.kv_pos0;
  CHECK_THROWS_AS(gpu::attention(a, nullptr), std::invalid_argument);  // one key too many
}

TEST_CASE("cuda matmul through cuBLAS matches the CPU twin for f32 f16 bf16", "[cuda]") {
  // Against the twin (same input rounding, double sums): 1e-5 for every dtype, since only the
  // f32 summation order differs. Against a pure f32 product: f16 2e-3 and bf16 1.5e-2 — the
  // rounding of x and W to 11 and 8 significant bits (unit roundoff 4.9e-4, 3.9e-3).
  const int n_in = 257, n_out = 1003;
  gpu::Blas blas;
  cudaStream_t stream = nullptr;
  SPECCHAT_CUDA_CHECK(cudaStreamCreate(&stream));
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const int64_t nw = static_cast<int64_t>(n_out) * n_in;
    std::vector<uint8_t> w(static_cast<size_t>(nw) * specchat::dtype_size(dt));
    cpu::random_fill(w.data(), dt, nw, 77, 0.1f);
    std::vector<float> w32(static_cast<size_t>(nw));
    cpu::convert_to_f32(w.data(), dt, w32.data(), nw);
    DeviceBuffer<uint8_t> dw(w);
    for (int nt : {1, 3, 17, 40}) {
      CAPTURE(specchat::dtype_name(dt), nt);
      const auto x = random_floats(static_cast<size_t>(nt) * n_in, 5 + nt, -3, 3);
      DeviceBuffer<float> dx(x), dy(static_cast<size_t>(nt) * n_out);
      const size_t sb = gpu::matmul_scratch_bytes(dt, nt, n_in);
      DeviceBuffer<uint8_t> scratch(sb);
      gpu::matmul(blas, dx.get(), dw.get(), dt, dy.get(), nt, n_in, n_out, scratch.get(), sb, stream);
      SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(stream));
      const auto got = dy.download();
      std::vector<float> twin(got.size()), exact(got.size());
      cpu::matmul(x.data(), w.data(), dt, twin.data(), nt, n_in, n_out, nullptr, 0);
      cpu::matmul(x.data(), w32.data(), exact.data(), nt, n_in, n_out);
      CHECK(normalized_error(got, twin) < 1e-5);
      const double tol_exact = dt == DType::f32 ? 1e-5 : (dt == DType::f16 ? 2e-3 : 1.5e-2);
      CHECK(normalized_error(got, exact) < tol_exact);
    }
  }
  {
    // Too small a scratch is refused before any work.
    DeviceBuffer<float> dx(257), dy(1003);
    CHECK_THROWS_AS(gpu::matmul(blas, dx.get(), dx.get(), DType::f16, dy.get(), 1, n_in, n_out,
                                nullptr, 0, stream),
                    std::invalid_argument);
  }
  SPECCHAT_CUDA_CHECK(cudaStreamDestroy(stream));
}

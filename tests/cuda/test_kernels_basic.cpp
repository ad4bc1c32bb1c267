// [cuda] element-wise, row and data-movement kernels against their CPU twins on seeded random
// inputs, sizes not multiples of 32. Tolerances are normalized errors ||gpu - cpu|| / ||cpu||.
#include <catch2/catch.hpp>

#include <cstring>

#include "cuda_test_util.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/kv_compact.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/kv_compact.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/sampling.h"

using specchat::DType;
using specchat::test::DeviceBuffer;
using specchat::test::normalized_error;
using specchat::test::random_floats;
namespace cpu = specchat::cpu;
namespace gpu = specchat::cuda;

TEST_CASE("cuda device info reports memory and bandwidth", "[cuda]") {
  const gpu::DeviceInfo info = gpu::device_info(0);
  CHECK(!info.name.empty());
  CHECK(info.total_bytes > 0);
  CHECK(info.free_bytes <= info.total_bytes);
  CHECK(info.bandwidth_gbs > 0);
}

TEST_CASE("cuda embedding gather equals the CPU twin exactly for f32 f16 bf16", "[cuda]") {
  const int n_vocab = 1003, d_model = 257;
  const std::vector<int32_t> ids = {0, 1002, 17, 17, 500, 3, 999};
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    CAPTURE(specchat::dtype_name(dt));
    const int64_t n = static_cast<int64_t>(n_vocab) * d_model;
    std::vector<uint8_t> table(static_cast<size_t>(n) * specchat::dtype_size(dt));
    cpu::random_fill(table.data(), dt, n, 11, 1.0f);
    DeviceBuffer<uint8_t> d_table(table);
    DeviceBuffer<int32_t> d_ids(ids);
    const int nt = static_cast<int>(ids.size());
    DeviceBuffer<float> d_out(static_cast<size_t>(nt) * d_model);
    gpu::embedding_gather(d_table.get(), dt, d_ids.get(), d_out.get(), nt, d_model, nullptr);
    std::vector<float> want(static_cast<size_t>(nt) * d_model);
    cpu::embedding_gather(table.data(), dt, ids.data(), want.data(), nt, d_model);
    CHECK(d_out.download() == want);  // widening is exact
  }
}

TEST_CASE("cuda rmsnorm matches the CPU twin", "[cuda]") {
  // 1e-6: f32 block sum vs the twin's double sum, one sqrt; errors are a few ulp.
  for (int nt : {1, 3, 17}) {
    for (int d : {257, 4099}) {
      const auto x = random_floats(static_cast<size_t>(nt) * d, 1 + nt, -3, 3);
      const auto w = random_floats(static_cast<size_t>(d), 2 + d, 0.5f, 1.5f);
      DeviceBuffer<float> dx(x), dw(w), dout(x.size());
      gpu::rmsnorm(dx.get(), dw.get(), dout.get(), nt, d, 1e-5f, nullptr);
      std::vector<float> want(x.size());
      cpu::rmsnorm(x.data(), w.data(), want.data(), nt, d, 1e-5f);
      CHECK(normalized_error(dout.download(), want) < 1e-6);
      // In place (out aliases x), as the backend may use it.
      gpu::rmsnorm(dx.get(), dw.get(), dx.get(), nt, d, 1e-5f, nullptr);
      CHECK(normalized_error(dx.download(), want) < 1e-6);
    }
  }
}

TEST_CASE("cuda rope matches the CPU twin", "[cuda]") {
  // 1e-6: angles in double on both sides; device pow/sin/cos are within 2 ulp of double.
  for (int hd : {64, 128, 6}) {
    for (int nt : {1, 3, 17}) {
      const int n_head = 5;
      auto x = random_floats(static_cast<size_t>(nt) * n_head * hd, 7 + hd + nt);
      std::vector<int32_t> pos(static_cast<size_t>(nt));
      for (int t = 0; t < nt; ++t) pos[static_cast<size_t>(t)] = 4000 - 37 * t;
      DeviceBuffer<float> dx(x);
      DeviceBuffer<int32_t> dpos(pos);
      gpu::rope(dx.get(), dpos.get(), nt, n_head, hd, 10000.0f, nullptr);
      cpu::rope(x.data(), pos.data(), nt, n_head, hd, 10000.0f);
      CHECK(normalized_error(dx.download(), x) < 1e-6);
    }
  }
}

TEST_CASE("cuda swiglu and add match the CPU twins", "[cuda]") {
  const int64_t n = 17 * 11008 + 5;
  const auto g = random_floats(static_cast<size_t>(n), 3, -8, 8);
  const auto u = random_floats(static_cast<size_t>(n), 4, -2, 2);
  DeviceBuffer<float> dg(g), du(u), dout(static_cast<size_t>(n));
  gpu::swiglu(dg.get(), du.get(), dout.get(), n, nullptr);
  std::vector<float> want(static_cast<size_t>(n));
  cpu::swiglu(g.data(), u.data(), want.data(), n);
  CHECK(normalized_error(dout.download(), want) < 1e-6);  // expf within 2 ulp
  gpu::add_inplace(dg.get(), du.get(), n, nullptr);
  auto sum = g;
  cpu::add_inplace(sum.data(), u.data(), n);
  CHECK(dg.download() == sum);  // one IEEE add per element: exact
}

TEST_CASE("cuda random_fill_blocks is bit-identical to the CPU twin", "[cuda]") {
  for (DType dt : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q5_k, DType::q6_k}) {
    CAPTURE(specchat::dtype_name(dt));
    const int64_t n = 256 * 37;
    const size_t bytes = specchat::dtype_row_bytes(dt, static_cast<uint64_t>(n));
    DeviceBuffer<uint8_t> d(bytes);
    gpu::random_fill_blocks(d.get(), dt, n, 42, 0.02f, nullptr);
    std::vector<uint8_t> want(bytes);
    cpu::random_fill_blocks(want.data(), dt, n, 42, 0.02f);
    CHECK(d.download() == want);
  }
}

TEST_CASE("cuda convert and random_fill are bit-identical to the CPU twins", "[cuda]") {
  const int64_t n = 100003;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    CAPTURE(specchat::dtype_name(dt));
    const size_t bytes = static_cast<size_t>(n) * specchat::dtype_size(dt);
    DeviceBuffer<uint8_t> d(bytes);
    gpu::random_fill(d.get(), dt, n, 42, 0.02f, nullptr);
    std::vector<uint8_t> want(bytes);
    cpu::random_fill(want.data(), dt, n, 42, 0.02f);
    CHECK(d.download() == want);

    // Round trip f32 -> dt -> f32 against the CPU, including values near the f16 range limits.
    auto x = random_floats(static_cast<size_t>(n), 5, -70000, 70000);
    x[0] = 65519.0f;
    x[1] = 65520.0f;
    x[2] = 1e-7f;  // f16 subnormal
    x[3] = -0.0f;
    DeviceBuffer<float> dx(x), dback(x.size());
    gpu::convert_from_f32(dx.get(), d.get(), dt, n, nullptr);
    std::vector<uint8_t> conv(bytes);
    cpu::convert_from_f32(x.data(), conv.data(), dt, n);
    CHECK(d.download() == conv);
    gpu::convert_to_f32(d.get(), dt, dback.get(), n, nullptr);
    std::vector<float> back(x.size());
    cpu::convert_to_f32(conv.data(), dt, back.data(), n);
    const auto got = dback.download();
    CHECK(std::memcmp(got.data(), back.data(), back.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("cuda kv compaction equals the CPU twin on overlapping paths", "[cuda]") {
  const int n_layer = 3, n_ctx = 60, row_floats = 37;
  const int64_t row_stride = 40, layer_stride = n_ctx * row_stride + 3;
  const auto init = random_floats(static_cast<size_t>(n_layer * layer_stride), 9);
  const std::vector<std::pair<int, std::vector<int32_t>>> cases = {
      {0, {1, 2}}, {10, {10, 12, 13, 17, 30}}, {5, {6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 59}}, {20, {20}}};
  for (const auto& [dst0, path] : cases) {
    CAPTURE(dst0, path.size());
    DeviceBuffer<float> dc(init);
    DeviceBuffer<int32_t> dp(path);
    gpu::kv_compact(dc.get(), n_layer, layer_stride, row_stride, row_floats, dp.get(),
                    static_cast<int>(path.size()), dst0, nullptr);
    auto want = init;
    cpu::kv_compact(want.data(), n_layer, layer_stride, row_stride, row_floats, path.data(),
                    static_cast<int>(path.size()), dst0);
    CHECK(dc.download() == want);
  }
}

TEST_CASE("cuda softmax argmax top-k and top-p match the CPU twins", "[cuda]") {
  const int n_rows = 3, n = 1003;
  auto x = random_floats(static_cast<size_t>(n_rows) * n, 21, -10, 10);
  // Ties: row 1 has its maximum twice (the lower index must win); row 2 is coarsely quantized
  // so top-k meets many equal values.
  float mx = -1e30f;
  int at = 0;
  for (int i = 0; i < n; ++i) {
    if (x[static_cast<size_t>(n + i)] > mx) {
      mx = x[static_cast<size_t>(n + i)];
      at = i;
    }
  }
  x[static_cast<size_t>(n + (at + 500) % n)] = mx;
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(2 * n + i)] = std::round(x[static_cast<size_t>(2 * n + i)]);

  DeviceBuffer<float> dx(x);
  DeviceBuffer<int32_t> dids(static_cast<size_t>(n_rows) * 64);
  DeviceBuffer<float> dvals(static_cast<size_t>(n_rows) * 64);

  SECTION("argmax") {
    gpu::argmax_rows(dx.get(), n_rows, n, dids.get(), nullptr);
    std::vector<int32_t> want(n_rows);
    cpu::argmax_rows(x.data(), n_rows, n, want.data());
    auto got = dids.download();
    got.resize(static_cast<size_t>(n_rows));
    CHECK(got == want);
  }
  SECTION("top-k") {
    for (int k : {1, 7, 64}) {
      gpu::topk_rows(dx.get(), n_rows, n, k, dids.get(), dvals.get(), nullptr);
      std::vector<int32_t> want_ids(static_cast<size_t>(n_rows * k));
      std::vector<float> want_vals(want_ids.size());
      cpu::topk_rows(x.data(), n_rows, n, k, want_ids.data(), want_vals.data());
      auto ids = dids.download();
      auto vals = dvals.download();
      ids.resize(want_ids.size());
      vals.resize(want_vals.size());
      CHECK(ids == want_ids);
      CHECK(vals == want_vals);
    }
  }
  SECTION("softmax then top-p") {
    gpu::softmax_rows(dx.get(), n_rows, n, nullptr);
    auto want = x;
    cpu::softmax_rows(want.data(), n_rows, n);
    const auto probs = dx.download();
    CHECK(normalized_error(probs, want) < 1e-6);  // f32 vs double sum, expf within 2 ulp
    // Sorted rows for top-p: the twin's own sorted probabilities, so both start equal.
    const int k = 64;
    std::vector<int32_t> ids(static_cast<size_t>(n_rows * k));
    std::vector<float> sorted(ids.size());
    cpu::topk_rows(want.data(), n_rows, n, k, ids.data(), sorted.data());
    cpu::softmax_rows(sorted.data(), n_rows, k);  // any sorted distribution: softmax keeps the order
    for (float p : {0.3f, 0.9f, 1.0f}) {
      DeviceBuffer<float> dp(sorted);
      DeviceBuffer<int32_t> dkept(static_cast<size_t>(n_rows));
      gpu::topp_rows(dp.get(), n_rows, k, p, dkept.get(), nullptr);
      auto w = sorted;
      std::vector<int32_t> kept(static_cast<size_t>(n_rows));
      cpu::topp_rows(w.data(), n_rows, k, p, kept.data());
      CHECK(dp.download() == w);  // same sequential double sums: exact
      CHECK(dkept.download() == kept);
    }
  }
}

// [cuda] block weight types: device dequantization bit for bit against cpu::dequantize_row_ref,
// and the dequantize-and-dot product against its CPU twin cpu::linear_ref (and batch
// invariance), on seeded weights with row counts that are not multiples of 32.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/quant.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/quant.h"

using specchat::DType;
using specchat::test::DeviceBuffer;
using specchat::test::normalized_error;
using specchat::test::random_floats;
namespace cpu = specchat::cpu;
namespace gpu = specchat::cuda;

namespace {

constexpr DType kTypes[] = {DType::q8_0, DType::q4_0, DType::q4_k, DType::q5_k, DType::q6_k};

// W [n_out, n_in] uniform in ±1/sqrt(n_in), quantized by cpu::quantize_row.
std::vector<uint8_t> quantized(DType t, int n_out, int n_in, uint32_t seed) {
  const auto w = random_floats(static_cast<size_t>(n_out) * n_in, seed, -1.0f / std::sqrt(float(n_in)),
                               1.0f / std::sqrt(float(n_in)));
  std::vector<uint8_t> q(specchat::dtype_row_bytes(t, static_cast<uint64_t>(n_in)) * static_cast<size_t>(n_out));
  cpu::quantize_row(t, w.data(), q.data(), static_cast<int64_t>(w.size()));
  return q;
}

}  // namespace

TEST_CASE("cuda dequantize gives the CPU reference's bits for every block type", "[cuda][quant]") {
  for (DType t : kTypes) {
    CAPTURE(specchat::dtype_name(t));
    const int n_in = 1280, rows = 37;
    const std::vector<uint8_t> q = quantized(t, rows, n_in, 3);
    const int64_t n = static_cast<int64_t>(rows) * n_in;
    DeviceBuffer<uint8_t> dq(q);
    DeviceBuffer<float> dy(static_cast<size_t>(n));
    gpu::dequantize(dq.get(), t, dy.get(), n, nullptr);
    std::vector<float> want(static_cast<size_t>(n));
    cpu::dequantize_row_ref(t, q.data(), want.data(), n);
    const std::vector<float> got = dy.download();
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    CHECK(differ == 0);
  }
}

TEST_CASE("cuda dequantize_f16 gives the CPU reference's values rounded to f16 bit for bit", "[cuda][quant]") {
  for (DType t : kTypes) {
    CAPTURE(specchat::dtype_name(t));
    const int n_in = 1280, rows = 37;
    const std::vector<uint8_t> q = quantized(t, rows, n_in, 4);
    const int64_t n = static_cast<int64_t>(rows) * n_in;
    DeviceBuffer<uint8_t> dq(q);
    DeviceBuffer<uint16_t> dy(static_cast<size_t>(n));
    gpu::dequantize_f16(dq.get(), t, dy.get(), n, nullptr);
    std::vector<float> f(static_cast<size_t>(n));
    cpu::dequantize_row_ref(t, q.data(), f.data(), n);
    std::vector<uint16_t> want(static_cast<size_t>(n));
    cpu::convert_from_f32(f.data(), want.data(), DType::f16, n);
    CHECK(dy.download() == want);
  }
}

TEST_CASE("cuda quant_matmul matches the CPU twin and is batch-invariant", "[cuda][quant]") {
  for (DType t : kTypes) {
    const int bs = specchat::dtype_block_size(t);
    for (const auto& [n_in, n_out] : std::vector<std::pair<int, int>>{{bs, 37}, {5 * bs, 130}, {1280, 45}}) {
      const std::vector<uint8_t> q = quantized(t, n_out, n_in, 7u + static_cast<uint32_t>(n_in));
      DeviceBuffer<uint8_t> dq(q);
      for (int n : {1, 3, 8, 9, 17, 64}) {
        CAPTURE(specchat::dtype_name(t), n_in, n_out, n);
        const auto x = random_floats(static_cast<size_t>(n) * n_in, 11u + static_cast<uint32_t>(n));
        DeviceBuffer<float> dx(x);
        DeviceBuffer<float> dy(static_cast<size_t>(n) * n_out);
        gpu::quant_matmul(dx.get(), dq.get(), t, dy.get(), n, n_in, n_out, nullptr);
        std::vector<float> want(static_cast<size_t>(n) * n_out);
        cpu::linear_ref(x.data(), q.data(), t, want.data(), n, n_in, n_out);
        const std::vector<float> got = dy.download();
        // Same dequantized weights; f32 fma chains per lane and a warp tree against the twin's
        // double sums: a few ulp of the row norms, 1e-5 normalized as for the cuBLAS f32 path.
        CHECK(normalized_error(got, want) < 1e-5);
        // The last row alone gives the same bits.
        DeviceBuffer<float> dx1(std::vector<float>(x.end() - n_in, x.end()));
        DeviceBuffer<float> dy1(static_cast<size_t>(n_out));
        gpu::quant_matmul(dx1.get(), dq.get(), t, dy1.get(), 1, n_in, n_out, nullptr);
        const std::vector<float> one = dy1.download();
        CHECK(std::equal(one.begin(), one.end(), got.end() - n_out));
      }
    }
  }
  CHECK_THROWS_AS(gpu::quant_matmul(nullptr, nullptr, DType::q4_k, nullptr, 1, 100, 4, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(gpu::quant_matmul(nullptr, nullptr, DType::f16, nullptr, 1, 256, 4, nullptr), std::invalid_argument);
}

TEST_CASE("cuda embedding gather of block tables equals the CPU twin exactly", "[cuda][quant]") {
  const int d = 512, n_vocab = 41;
  const std::vector<int32_t> ids = {40, 0, 7, 7, 23};
  for (DType t : kTypes) {
    CAPTURE(specchat::dtype_name(t));
    const std::vector<uint8_t> table = quantized(t, n_vocab, d, 5);
    DeviceBuffer<uint8_t> dt(table);
    DeviceBuffer<int32_t> di(ids);
    const int nt = static_cast<int>(ids.size());
    DeviceBuffer<float> dout(static_cast<size_t>(nt) * d);
    gpu::embedding_gather(dt.get(), t, di.get(), dout.get(), nt, d, nullptr);
    std::vector<float> want(static_cast<size_t>(nt) * d);
    cpu::embedding_gather(table.data(), t, ids.data(), want.data(), nt, d);
    const std::vector<float> got = dout.download();
    CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
  }
}

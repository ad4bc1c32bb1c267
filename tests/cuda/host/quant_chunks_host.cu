// Host instantiations of the CUDA quant kernel's shared block code (see quant_chunks_host.h).
#include "tests/cuda/host/quant_chunks_host.h"

#include <stdexcept>

#include "kernels/cuda/quant_blocks.cuh"

namespace specchat::test {
namespace {

constexpr int kTok = 8;  // the kernel's rows of x per pass (kernels/cuda/quant.cu)

template <DType T, bool kVec>
void matmul_as(const float* x, const uint8_t* w, float* y, int nt, int n_in, int n_out) {
  const int64_t row_bytes = static_cast<int64_t>(dtype_row_bytes(T, static_cast<uint64_t>(n_in)));
  for (int j = 0; j < n_out; ++j) {
    float lanes[32][kTok] = {};
    for (int lane = 0; lane < 32; ++lane) {
      cuda::blocks::lane_partial<T, kVec, kTok>(w + j * row_bytes, x, n_in, 0, nt, lane, lanes[lane]);
    }
    // detail::warp_sum: v += shfl_xor(v, o) for o = 16, 8, 4, 2, 1; lane 0's result.
    for (int o = 16; o > 0; o >>= 1) {
      float next[32][kTok];
      for (int l = 0; l < 32; ++l) {
        for (int k = 0; k < kTok; ++k) next[l][k] = lanes[l][k] + lanes[l ^ o][k];
      }
      for (int l = 0; l < 32; ++l) {
        for (int k = 0; k < kTok; ++k) lanes[l][k] = next[l][k];
      }
    }
    for (int k = 0; k < nt; ++k) y[static_cast<int64_t>(k) * n_out + j] = lanes[0][k];
  }
}

template <DType T>
void matmul_typed(bool vec, const float* x, const uint8_t* w, float* y, int nt, int n_in, int n_out) {
  if (vec) {
    matmul_as<T, true>(x, w, y, nt, n_in, n_out);
  } else {
    matmul_as<T, false>(x, w, y, nt, n_in, n_out);
  }
}

template <DType T>
void chunk_typed(bool vec, const uint8_t* row, int c, float* out) {
  float v[32];
  if (vec) {
    cuda::blocks::chunk_values<T, true>(row, c, v);
  } else {
    cuda::blocks::chunk_values<T, false>(row, c, v);
  }
  for (int l = 0; l < 32; ++l) out[l] = v[l];
}

}  // namespace

void chunk_values_host(DType t, bool vec, const uint8_t* row, int c, float* out) {
  switch (t) {
    case DType::q8_0: chunk_typed<DType::q8_0>(vec, row, c, out); break;
    case DType::q4_0: chunk_typed<DType::q4_0>(vec, row, c, out); break;
    case DType::q4_k: chunk_typed<DType::q4_k>(vec, row, c, out); break;
    case DType::q5_k: chunk_typed<DType::q5_k>(vec, row, c, out); break;
    case DType::q6_k: chunk_typed<DType::q6_k>(vec, row, c, out); break;
    default: throw std::invalid_argument("chunk_values_host: not a block type");
  }
}

void quant_matmul_host(DType t, bool vec, const float* x, const uint8_t* w, float* y, int nt, int n_in, int n_out) {
  if (nt < 1 || nt > kTok) throw std::invalid_argument("quant_matmul_host: nt in [1, 8]");
  switch (t) {
    case DType::q8_0: matmul_typed<DType::q8_0>(vec, x, w, y, nt, n_in, n_out); break;
    case DType::q4_0: matmul_typed<DType::q4_0>(vec, x, w, y, nt, n_in, n_out); break;
    case DType::q4_k: matmul_typed<DType::q4_k>(vec, x, w, y, nt, n_in, n_out); break;
    case DType::q5_k: matmul_typed<DType::q5_k>(vec, x, w, y, nt, n_in, n_out); break;
    case DType::q6_k: matmul_typed<DType::q6_k>(vec, x, w, y, nt, n_in, n_out); break;
    default: throw std::invalid_argument("quant_matmul_host: not a block type");
  }
}

}  // namespace specchat::test

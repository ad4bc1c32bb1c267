#include "kernels/cpu/linear.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequant_simd.h"
#include "kernels/cpu/linear_panels.h"
#include "kernels/cpu/linear_q8.h"
#include "kernels/cpu/linear_tiling.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"

namespace specchat::cpu {

#if defined(__x86_64__)
bool tiling::widen_block_or_f32(const void* w, DType t, int64_t off, float* dst, int n) {
  if (dtype_is_block(t)) {  // the 8-lane dequantizer: the tile, not the dequantization, is the hot loop
    dequantize_row_avx2(t, block_at(w, t, off), dst, n);
    return true;
  }
  if (t == DType::f32) {
    std::memcpy(dst, static_cast<const float*>(w) + off, sizeof(float) * static_cast<size_t>(n));
    return true;
  }
  return false;
}
#endif

using namespace tiling;

namespace {


// Portable widening of n weights starting at element `off` of a row.
void widen_generic(const void* w, DType t, int64_t off, float* dst, int n) {
  if (dtype_is_block(t)) {
    dequantize_row_ref(t, block_at(w, t, off), dst, n);
  } else if (t == DType::f32) {
    std::memcpy(dst, static_cast<const float*>(w) + off, sizeof(float) * static_cast<size_t>(n));
  } else {
    convert_to_f32(static_cast<const uint16_t*>(w) + off, t, dst, n);
  }
}

// One block (rows j0 .. j0 + nr − 1 of W, nr <= 4) for every row of x, portable version.
void block_generic(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in, int n_out,
                   int j0, int nr) {
  alignas(32) float tile[kRows][kChunk];
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int kc = std::min(kChunk, n_in - k0);
    for (int r = 0; r < nr; ++r) widen_generic(w, t, static_cast<int64_t>(j0 + r) * n_in + k0, tile[r], kc);
    for (int tk = 0; tk < n_tokens; ++tk) {
      const float* xr = x + static_cast<int64_t>(tk) * n_in + k0;
      for (int r = 0; r < nr; ++r) {
        float lanes[8] = {};
        const int kc8 = kc / 8 * 8;
        for (int i = 0; i < kc8; i += 8) {
          for (int l = 0; l < 8; ++l) lanes[l] += xr[i + l] * tile[r][i + l];
        }
        float s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
        for (int i = kc8; i < kc; ++i) s += xr[i] * tile[r][i];
        float* out = y + static_cast<int64_t>(tk) * n_out + j0 + r;
        *out = k0 == 0 ? s : *out + s;
      }
    }
  }
}

#if defined(__x86_64__)

SPECCHAT_AVX2 void widen_avx2(const void* w, DType t, int64_t off, float* dst, int n) {
  if (widen_block_or_f32(w, t, off, dst, n)) return;
  const uint16_t* src = static_cast<const uint16_t*>(w) + off;
  const int n8 = n / 8 * 8;
  if (t == DType::f16) {
    for (int i = 0; i < n8; i += 8) {
      _mm256_store_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
  } else {  // bf16: the upper half of an f32
    for (int i = 0; i < n8; i += 8) {
      const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
      _mm256_store_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
  }
  if (n8 < n) convert_to_f32(src + n8, t, dst + n8, n - n8);
}

// 8 16-bit weights widened to f32 in a register (exactly the values widen_avx2 stores).
SPECCHAT_AVX2 inline __m256 widen8(const uint16_t* p, bool f16) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return f16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// block_avx2 for one or two rows of x and F16/BF16 weights: the weights are widened in registers
// as they are used instead of through the L1 tile. Per output element the same operations in the same order as
// the tile path (8 lane sums over k by FMA, hsum, scalar tail FMAs), so results are bitwise the
// same and the kernel stays batch-invariant.
SPECCHAT_AVX2 void block_avx2_direct(const float* x, const uint16_t* w, bool f16, float* y, int n_tokens, int n_in,
                                     int n_out, int j0, int nr) {
  alignas(32) float tail[kRows][8];
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int kc = std::min(kChunk, n_in - k0);
    const int kc8 = kc / 8 * 8;
    const uint16_t* r[kRows];
    for (int q = 0; q < kRows; ++q) r[q] = w + static_cast<int64_t>(j0 + std::min(q, nr - 1)) * n_in + k0;
    if (kc8 < kc) {  // the last kc - kc8 weights of each row, widened once
      for (int q = 0; q < nr; ++q) convert_to_f32(r[q] + kc8, f16 ? DType::f16 : DType::bf16, tail[q], kc - kc8);
      for (int q = nr; q < kRows; ++q) std::memcpy(tail[q], tail[nr - 1], sizeof tail[q]);
    }
    auto store = [&](int tk, const float* sv) {
      float* out = y + static_cast<int64_t>(tk) * n_out + j0;
      for (int q = 0; q < nr; ++q) out[q] = k0 == 0 ? sv[q] : out[q] + sv[q];
    };
    const float* xa = x + k0;
    if (n_tokens == 2) {
      const float* xb = xa + n_in;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      for (int i = 0; i < kc8; i += 8) {
        const __m256 va = _mm256_loadu_ps(xa + i), vb = _mm256_loadu_ps(xb + i);
        const __m256 u0 = widen8(r[0] + i, f16), u1 = widen8(r[1] + i, f16);
        const __m256 u2 = widen8(r[2] + i, f16), u3 = widen8(r[3] + i, f16);
        a0 = _mm256_fmadd_ps(va, u0, a0);
        a1 = _mm256_fmadd_ps(va, u1, a1);
        a2 = _mm256_fmadd_ps(va, u2, a2);
        a3 = _mm256_fmadd_ps(va, u3, a3);
        b0 = _mm256_fmadd_ps(vb, u0, b0);
        b1 = _mm256_fmadd_ps(vb, u1, b1);
        b2 = _mm256_fmadd_ps(vb, u2, b2);
        b3 = _mm256_fmadd_ps(vb, u3, b3);
      }
      float sa[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      float sb[4] = {hsum(b0), hsum(b1), hsum(b2), hsum(b3)};
      for (int i = kc8; i < kc; ++i) {
        for (int q = 0; q < kRows; ++q) {
          sa[q] = std::fma(xa[i], tail[q][i - kc8], sa[q]);
          sb[q] = std::fma(xb[i], tail[q][i - kc8], sb[q]);
        }
      }
      store(0, sa);
      store(1, sb);
    } else {
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int i = 0; i < kc8; i += 8) {
        const __m256 va = _mm256_loadu_ps(xa + i);
        a0 = _mm256_fmadd_ps(va, widen8(r[0] + i, f16), a0);
        a1 = _mm256_fmadd_ps(va, widen8(r[1] + i, f16), a1);
        a2 = _mm256_fmadd_ps(va, widen8(r[2] + i, f16), a2);
        a3 = _mm256_fmadd_ps(va, widen8(r[3] + i, f16), a3);
      }
      float sa[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      for (int i = kc8; i < kc; ++i) {
        for (int q = 0; q < kRows; ++q) sa[q] = std::fma(xa[i], tail[q][i - kc8], sa[q]);
      }
      store(0, sa);
    }
  }
}


SPECCHAT_AVX2 void block_avx2(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in,
                              int n_out, int j0, int nr) {
  if (t == DType::f16 || t == DType::bf16) {
    // 16-bit weights: two rows of x at a time, the weights re-widened in registers for each pair.
    // Measured faster than widening once into the L1 tile at every batch size (this VM's AMD
    // EPYC, one thread, 864 x 320 F16: 1 row 37.5 -> 16.9 us, 4 rows 57 -> 33, 8 rows 90 -> 61,
    // 32 rows 272 -> 234): the tile's stores and reloads cost more than re-widening. Block
    // (quantized) types keep the tile: their dequantization is far dearer than F16C.
    for (int tk = 0; tk < n_tokens; tk += 2) {
      block_avx2_direct(x + static_cast<int64_t>(tk) * n_in, static_cast<const uint16_t*>(w), t == DType::f16,
                        y + static_cast<int64_t>(tk) * n_out, std::min(2, n_tokens - tk), n_in, n_out, j0, nr);
    }
    return;
  }
  if (dtype_is_block(t) && n_tokens <= kDirectMaxBlockRowsAvx2 &&
      blocks_direct_avx2(x, w, t, y, n_tokens, n_in, n_out, j0, nr)) {
    return;
  }
  alignas(32) float tile[kRows][kChunk];
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int kc = std::min(kChunk, n_in - k0);
    const int kc8 = kc / 8 * 8;
    for (int r = 0; r < nr; ++r) widen_avx2(w, t, static_cast<int64_t>(j0 + r) * n_in + k0, tile[r], kc);
    // A short block repeats its last row (computed, not stored) so the loop stays 4 wide.
    const float* w0 = tile[0];
    const float* w1 = tile[std::min(1, nr - 1)];
    const float* w2 = tile[std::min(2, nr - 1)];
    const float* w3 = tile[std::min(3, nr - 1)];
    auto store = [&](int tk, const float* s) {
      float* out = y + static_cast<int64_t>(tk) * n_out + j0;
      for (int r = 0; r < nr; ++r) out[r] = k0 == 0 ? s[r] : out[r] + s[r];
    };
    int tk = 0;
    for (; tk + 2 <= n_tokens; tk += 2) {
      const float* xa = x + static_cast<int64_t>(tk) * n_in + k0;
      const float* xb = xa + n_in;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      for (int i = 0; i < kc8; i += 8) {
        const __m256 va = _mm256_loadu_ps(xa + i), vb = _mm256_loadu_ps(xb + i);
        const __m256 u0 = _mm256_load_ps(w0 + i), u1 = _mm256_load_ps(w1 + i);
        const __m256 u2 = _mm256_load_ps(w2 + i), u3 = _mm256_load_ps(w3 + i);
        a0 = _mm256_fmadd_ps(va, u0, a0);
        a1 = _mm256_fmadd_ps(va, u1, a1);
        a2 = _mm256_fmadd_ps(va, u2, a2);
        a3 = _mm256_fmadd_ps(va, u3, a3);
        b0 = _mm256_fmadd_ps(vb, u0, b0);
        b1 = _mm256_fmadd_ps(vb, u1, b1);
        b2 = _mm256_fmadd_ps(vb, u2, b2);
        b3 = _mm256_fmadd_ps(vb, u3, b3);
      }
      float sa[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      float sb[4] = {hsum(b0), hsum(b1), hsum(b2), hsum(b3)};
      for (int i = kc8; i < kc; ++i) {
        sa[0] = std::fma(xa[i], w0[i], sa[0]);
        sa[1] = std::fma(xa[i], w1[i], sa[1]);
        sa[2] = std::fma(xa[i], w2[i], sa[2]);
        sa[3] = std::fma(xa[i], w3[i], sa[3]);
        sb[0] = std::fma(xb[i], w0[i], sb[0]);
        sb[1] = std::fma(xb[i], w1[i], sb[1]);
        sb[2] = std::fma(xb[i], w2[i], sb[2]);
        sb[3] = std::fma(xb[i], w3[i], sb[3]);
      }
      store(tk, sa);
      store(tk + 1, sb);
    }
    if (tk < n_tokens) {  // the odd last row: same operations per element as the pairs
      const float* xa = x + static_cast<int64_t>(tk) * n_in + k0;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int i = 0; i < kc8; i += 8) {
        const __m256 va = _mm256_loadu_ps(xa + i);
        a0 = _mm256_fmadd_ps(va, _mm256_load_ps(w0 + i), a0);
        a1 = _mm256_fmadd_ps(va, _mm256_load_ps(w1 + i), a1);
        a2 = _mm256_fmadd_ps(va, _mm256_load_ps(w2 + i), a2);
        a3 = _mm256_fmadd_ps(va, _mm256_load_ps(w3 + i), a3);
      }
      float sa[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      for (int i = kc8; i < kc; ++i) {
        sa[0] = std::fma(xa[i], w0[i], sa[0]);
        sa[1] = std::fma(xa[i], w1[i], sa[1]);
        sa[2] = std::fma(xa[i], w2[i], sa[2]);
        sa[3] = std::fma(xa[i], w3[i], sa[3]);
      }
      store(tk, sa);
    }
  }
}

bool have_avx512() { return cpu_has_avx512_fma_f16c(); }

bool have_avx2() { return cpu_has_avx2_fma_f16c(); }
#else
bool have_avx2() { return false; }
bool have_avx512() { return false; }
#endif

}  // namespace

const char* linear_isa() { return have_avx512() ? "avx512f" : have_avx2() ? "avx2+fma+f16c" : "generic"; }

namespace {

// The kernels prefetch their weights 16 KiB ahead of the block they work on, so the first 16 KiB
// of a range would come from demand misses alone: request them up front (one-row q4_K products
// over matrices beyond the caches, 2 threads: 512 x 2048 3-9 % faster, docs/perf/cpu.md).
void prefetch_head(const LinearJob& jb, int b0, int b1) {
  const size_t rb = dtype_row_bytes(jb.w_type, static_cast<uint64_t>(jb.n_in));
  const char* p0 = static_cast<const char*>(jb.w) + rb * static_cast<size_t>(b0) * kRows;
  const size_t n = std::min<size_t>(16384, rb * static_cast<size_t>(std::min(jb.n_out, b1 * kRows) - b0 * kRows));
  for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p0 + o);
}

// Blocks [b0, b1) of one job (4 weight rows each) on this thread; `act` the job's activations
// rounded to 8 bits (integer path) or null (f32 path).
void run_blocks(const LinearJob& jb, const q8::Act* act, int b0, int b1) {
  prefetch_head(jb, b0, b1);
  if (act) {
    const q8::Isa isa = q8::best_isa();
    for (int b = b0; b < b1; ++b) {
      const int j0 = b * kRows;
      q8::rows(isa, *act, jb.w, jb.w_type, jb.y, jb.n_out, j0, std::min(kRows, jb.n_out - j0));
    }
    return;
  }
  const bool avx512 = have_avx512();
  const bool avx2 = have_avx2();
  for (int b = b0; b < b1; ++b) {
    const int j0 = b * kRows, nr = std::min(kRows, jb.n_out - j0);
#if defined(__x86_64__)
    if (avx512) {
      block_avx512(jb.x, jb.w, jb.w_type, jb.y, jb.n_tokens, jb.n_in, jb.n_out, j0, nr);
      continue;
    }
    if (avx2) {
      block_avx2(jb.x, jb.w, jb.w_type, jb.y, jb.n_tokens, jb.n_in, jb.n_out, j0, nr);
      continue;
    }
#endif
    block_generic(jb.x, jb.w, jb.w_type, jb.y, jb.n_tokens, jb.n_in, jb.n_out, j0, nr);
  }
}

}  // namespace

bool linear_isa_supported(LinearIsa isa) {
  switch (isa) {
    case LinearIsa::generic: return true;
    case LinearIsa::avx2: return have_avx2();
    case LinearIsa::avx512: return have_avx512();
  }
  return false;
}

void linear_with_isa(LinearIsa isa, const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in,
                     int n_out, Activations act) {
  if (w_type == DType::f32) throw std::invalid_argument("linear_with_isa: 16-bit or block weights only");
  if (!linear_isa_supported(isa)) throw std::invalid_argument("linear_with_isa: this CPU lacks that variant");
  if (dtype_is_block(w_type) && n_in % dtype_block_size(w_type) != 0) {
    throw std::invalid_argument("linear_with_isa: rows are not whole blocks");
  }
  if (linear_rounds_activations(w_type, act)) {
    const q8::Isa qi = isa == LinearIsa::generic ? q8::Isa::generic
                       : isa == LinearIsa::avx2 || !q8::isa_supported(q8::Isa::avx512) ? q8::Isa::avx2
                                                                                        : q8::Isa::avx512;
    q8::Act a;
    q8::quantize(qi, x, n_tokens, n_in, a, nullptr, q8::form_for(w_type));
    for (int j0 = 0; j0 < n_out; j0 += kRows) q8::rows(qi, a, w, w_type, y, n_out, j0, std::min(kRows, n_out - j0));
    return;
  }
  for (int j0 = 0; j0 < n_out; j0 += kRows) {
    const int nr = std::min(kRows, n_out - j0);
#if defined(__x86_64__)
    if (isa == LinearIsa::avx512) {
      block_avx512(x, w, w_type, y, n_tokens, n_in, n_out, j0, nr);
      continue;
    }
    if (isa == LinearIsa::avx2) {
      block_avx2(x, w, w_type, y, n_tokens, n_in, n_out, j0, nr);
      continue;
    }
#endif
    block_generic(x, w, w_type, y, n_tokens, n_in, n_out, j0, nr);
  }
}

namespace {

int n_blocks_of(const LinearJob& jb) { return jb.n_tokens > 0 ? (jb.n_out + kRows - 1) / kRows : 0; }

}  // namespace

void linear(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out,
            ThreadPool* pool, Activations act) {
  const LinearJob jb{x, w, w_type, y, n_tokens, n_in, n_out, act};
  linear_multi(std::span<const LinearJob>(&jb, 1), pool);
}

void linear_multi(std::span<const LinearJob> jobs, ThreadPool* pool) {
  // Panel-packed jobs (linear_panels.h): one region over all their panels, in job order.
  bool any_panels = false, all_panels = true;
  for (const LinearJob& jb : jobs) {
    any_panels = any_panels || jb.panels;
    all_panels = all_panels && jb.panels;
  }
  if (any_panels && !all_panels) {
    for (const LinearJob& jb : jobs) linear_multi(std::span<const LinearJob>(&jb, 1), pool);
    return;
  }
  if (all_panels && !jobs.empty()) {
    linear_multi_panels(jobs, pool);
    return;
  }
  for (const LinearJob& jb : jobs) {
    if (dtype_is_block(jb.w_type) && jb.n_in % dtype_block_size(jb.w_type) != 0) {
      throw std::invalid_argument(std::string("linear: rows of ") + std::to_string(jb.n_in) + " " +
                                  dtype_name(jb.w_type) + " weights are not whole blocks");
    }
  }
  // F32 weights take cpu::matmul (its own kernel or OpenBLAS), one job at a time.
  bool all16 = true;
  for (const LinearJob& jb : jobs) all16 = all16 && jb.w_type != DType::f32;
  if (!all16) {
    for (const LinearJob& jb : jobs) {
      if (jb.w_type == DType::f32) {
        matmul(jb.x, static_cast<const float*>(jb.w), jb.y, jb.n_tokens, jb.n_in, jb.n_out, pool);
      } else {
        linear_multi(std::span<const LinearJob>(&jb, 1), pool);
      }
    }
    return;
  }
  // The integer path's activations: each job's x rounded once (jobs that share x share it),
  // before the region, in buffers this thread reuses from call to call.
  thread_local std::vector<q8::Act> act_store;
  if (act_store.size() < jobs.size()) act_store.resize(jobs.size());
  std::vector<const q8::Act*> acts(jobs.size(), nullptr);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const LinearJob& jb = jobs[i];
    if (!linear_rounds_activations(jb.w_type, jb.act) || jb.n_tokens <= 0) continue;
    for (size_t k = 0; k < i && !acts[i]; ++k) {
      if (acts[k] && jobs[k].x == jb.x && jobs[k].n_tokens == jb.n_tokens && jobs[k].n_in == jb.n_in &&
          acts[k]->form == q8::form_for(jb.w_type)) {
        acts[i] = acts[k];
      }
    }
    if (!acts[i]) {
      q8::quantize(q8::best_isa(), jb.x, jb.n_tokens, jb.n_in, act_store[i], pool, q8::form_for(jb.w_type));
      acts[i] = &act_store[i];
    }
  }
  int total = 0;
  int64_t work = 0;
  for (const LinearJob& jb : jobs) {
    total += n_blocks_of(jb);
    work += static_cast<int64_t>(jb.n_out) * jb.n_in * std::max(0, jb.n_tokens);
  }
  // Global blocks [g0, g1) across the jobs, in order.
  auto run = [&](int g0, int g1) {
    int base = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const LinearJob& jb = jobs[i];
      const int nb = n_blocks_of(jb);
      const int b0 = std::max(g0 - base, 0), b1 = std::min(g1 - base, nb);
      if (b0 < b1) run_blocks(jb, acts[i], b0, b1);
      base += nb;
      if (base >= g1) break;
    }
  };
  // Threads only pay off when there is enough work to split (below ~64k multiply-adds a
  // region's wake-up costs more than it saves). A contiguous lane of blocks per thread, cut in
  // chunks that an idle thread steals from the back (parallel_ranges), so each thread streams
  // its own weights and a descheduled one holds up only its chunk.
  const int n_threads = pool ? pool->n_threads() : 1;
  if (n_threads <= 1 || work < (1 << 16)) {
    run(0, total);
    return;
  }
  parallel_ranges(pool, total, 8, run);
}

void linear_ref(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out) {
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int j = 0; j < n_out; ++j) {
    widen_generic(w, w_type, static_cast<int64_t>(j) * n_in, row.data(), n_in);
    for (int t = 0; t < n_tokens; ++t) {
      const float* xr = x + static_cast<int64_t>(t) * n_in;
      double s = 0;
      for (int i = 0; i < n_in; ++i) s += static_cast<double>(xr[i]) * row[static_cast<size_t>(i)];
      y[static_cast<int64_t>(t) * n_out + j] = static_cast<float>(s);
    }
  }
}

}  // namespace specchat::cpu

// linear_panels.h: packing, the generic twin, the dispatch and the work split.
#include "kernels/cpu/linear_panels.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/linear_panels_impl.h"
#include "kernels/cpu/thread_pool.h"

namespace specchat::cpu {

namespace {

void check(DType type, int n_out, int n_in, const char* who) {
  if (type != DType::f16 && type != DType::bf16) {
    throw std::invalid_argument(std::string(who) + ": panels hold f16 or bf16 weights, not " + dtype_name(type));
  }
  if (n_out < 1 || n_in < 1) throw std::invalid_argument(std::string(who) + ": empty matrix");
}

int n_panels(int n_out) { return (n_out + kPanel - 1) / kPanel; }

// The generic twin: the chain of linear_panels.h, one output at a time.
void range_generic(const float* x, const uint16_t* wp, DType type, float* y, int n_tokens, int n_in, int n_out, int p0,
                   int p1) {
  float w[kPanel];
  for (int p = p0; p < p1; ++p) {
    const uint16_t* panel = wp + static_cast<size_t>(p) * static_cast<size_t>(n_in) * kPanel;
    const int lanes = std::min(kPanel, n_out - p * kPanel);
    for (int t = 0; t < n_tokens; ++t) {
      const float* xr = x + static_cast<size_t>(t) * static_cast<size_t>(n_in);
      float acc[kPanel] = {};
      for (int k = 0; k < n_in; ++k) {
        convert_to_f32(panel + static_cast<size_t>(k) * kPanel, type, w, kPanel);
        for (int l = 0; l < kPanel; ++l) acc[l] = std::fma(w[l], xr[k], acc[l]);
      }
      std::copy_n(acc, lanes, y + static_cast<size_t>(t) * static_cast<size_t>(n_out) + p * kPanel);
    }
  }
}

#if defined(__x86_64__)
// Panels [p0, p1) in passes of P panels (P from the widest row group), each pass over the rows
// in groups of up to Rmax: a pass's weights (P · n_in · 32 bytes) stay in L1/L2 while every row
// group reads them.
template <typename Tile>
void range_tiled(Tile tile, int max_rows, int (*max_panels)(int), const float* x, const uint16_t* wp, DType type,
                 float* y, int n_tokens, int n_in, int n_out, int p0, int p1) {
  const bool bf = type == DType::bf16;
  const int pmax = max_panels(std::min(n_tokens, max_rows));
  for (int p = p0; p < p1; p += pmax) {
    const int P = std::min(pmax, p1 - p);
    const uint16_t* w = wp + static_cast<size_t>(p) * static_cast<size_t>(n_in) * kPanel;
    for (int t = 0; t < n_tokens; t += max_rows) {
      const int R = std::min(max_rows, n_tokens - t);
      tile(bf, R, P, x + static_cast<size_t>(t) * static_cast<size_t>(n_in), w,
           y + static_cast<size_t>(t) * static_cast<size_t>(n_out), n_in, n_out, p * kPanel);
    }
  }
}
#endif

// Panels per pass of the kernel for a batch of n rows (its widest row group's tile).
int pass_panels(LinearIsa isa, int n) {
  n = std::max(1, n);
  if (isa == LinearIsa::avx512) return panels::max_panels512(std::min(n, panels::kMaxRows512));
  if (isa == LinearIsa::avx2) return panels::max_panels256(std::min(n, panels::kMaxRows256));
  return 1;
}

void range_isa(LinearIsa isa, const float* x, const void* wp, DType type, float* y, int n_tokens, int n_in, int n_out,
               int p0, int p1) {
  const auto* w = static_cast<const uint16_t*>(wp);
#if defined(__x86_64__)
  if (isa == LinearIsa::avx512) {
    range_tiled(panels::tile_avx512, panels::kMaxRows512, panels::max_panels512, x, w, type, y, n_tokens, n_in,
                n_out, p0, p1);
    return;
  }
  if (isa == LinearIsa::avx2) {
    range_tiled(panels::tile_avx2, panels::kMaxRows256, panels::max_panels256, x, w, type, y, n_tokens, n_in, n_out,
                p0, p1);
    return;
  }
#endif
  range_generic(x, w, type, y, n_tokens, n_in, n_out, p0, p1);
}

LinearIsa best_isa() {
  static const LinearIsa isa = cpu_has_avx512_fma_f16c() ? LinearIsa::avx512
                               : cpu_has_avx2_fma_f16c()  ? LinearIsa::avx2
                                                          : LinearIsa::generic;
  return isa;
}

}  // namespace

size_t panel_bytes(int n_out, int n_in) {
  return static_cast<size_t>(n_panels(n_out)) * kPanel * static_cast<size_t>(n_in) * sizeof(uint16_t);
}

void pack_panels(const void* w, DType type, int n_out, int n_in, void* dst, ThreadPool* pool) {
  check(type, n_out, n_in, "pack_panels");
  const auto* src = static_cast<const uint16_t*>(w);
  auto* out = static_cast<uint16_t*>(dst);
  auto pack = [&](int p0, int p1) {
    for (int p = p0; p < p1; ++p) {
      uint16_t* panel = out + static_cast<size_t>(p) * static_cast<size_t>(n_in) * kPanel;
      // By blocks of 128 columns: each row's block read in order, written into the panel's
      // 4 KiB block (in L1) with a stride of one panel step.
      const int lanes = std::min(kPanel, n_out - p * kPanel);
      for (int k0 = 0; k0 < n_in; k0 += 128) {
        const int k1 = std::min(n_in, k0 + 128);
        uint16_t* dst = panel + static_cast<size_t>(k0) * kPanel;
        for (int l = 0; l < kPanel; ++l) {
          if (l >= lanes) {  // padding rows
            for (int k = k0; k < k1; ++k) dst[static_cast<size_t>(k - k0) * kPanel + l] = 0;
            continue;
          }
          const uint16_t* row = src + static_cast<size_t>(p * kPanel + l) * static_cast<size_t>(n_in);
          for (int k = k0; k < k1; ++k) dst[static_cast<size_t>(k - k0) * kPanel + l] = row[k];
        }
      }
    }
  };
  parallel_ranges(pool, n_panels(n_out), 4, pack);
}

void linear_panels_range(const float* x, const void* wp, DType type, float* y, int n_tokens, int n_in, int n_out,
                         int p0, int p1) {
  if (n_tokens <= 0 || p0 >= p1) return;
  range_isa(best_isa(), x, wp, type, y, n_tokens, n_in, n_out, p0, p1);
}

void linear_panels(const float* x, const void* wp, DType type, float* y, int n_tokens, int n_in, int n_out,
                   ThreadPool* pool) {
  const LinearJob jb{x, wp, type, y, n_tokens, n_in, n_out, Activations::f32, true};
  linear_multi_panels(std::span<const LinearJob>(&jb, 1), pool);
}

void linear_multi_panels(std::span<const LinearJob> jobs, ThreadPool* pool) {
  // Work units: groups of as many panels as one pass of the kernel takes (8 at one row on
  // AVX-512), so a thread's share never cuts a pass short (fewer accumulators in flight).
  auto group = [](const LinearJob& jb) { return pass_panels(best_isa(), jb.n_tokens); };
  auto n_groups = [&](const LinearJob& jb) { return (n_panels(jb.n_out) + group(jb) - 1) / group(jb); };
  int total = 0;
  int64_t work = 0;
  for (const LinearJob& jb : jobs) {
    check(jb.w_type, jb.n_out, jb.n_in, "linear_multi");
    total += n_groups(jb);
    work += static_cast<int64_t>(jb.n_out) * jb.n_in * std::max(0, jb.n_tokens);
  }
  // Global groups [g0, g1) across the jobs, in order.
  auto run = [&](int g0, int g1) {
    int base = 0;
    for (const LinearJob& jb : jobs) {
      const int ng = n_groups(jb), gs = group(jb);
      const int b0 = std::max(g0 - base, 0), b1 = std::min(g1 - base, ng);
      if (b0 < b1) {
        linear_panels_range(jb.x, jb.w, jb.w_type, jb.y, jb.n_tokens, jb.n_in, jb.n_out, b0 * gs,
                            std::min(b1 * gs, n_panels(jb.n_out)));
      }
      base += ng;
      if (base >= g1) break;
    }
  };
  // Below 256k multiply-adds a region's wake-up costs more than it saves (the row-major kernel's
  // limit of 64k was measured for its slower inner loop): `bench --profile`, the draft's one-row
  // gate/up (128 -> 384 x 2) 7.4 -> 3.4 us, the target's O (320 -> 320) 5.8 -> 4.0 us; at 1M the
  // target's one-row gate/up ran serially, 17 -> 28 us.
  if (!pool || pool->n_threads() <= 1 || work < (int64_t{1} << 18)) {
    run(0, total);
    return;
  }
  parallel_ranges(pool, total, 4, run);
}

void linear_panels_with_isa(LinearIsa isa, const float* x, const void* wp, DType type, float* y, int n_tokens,
                            int n_in, int n_out) {
  check(type, n_out, n_in, "linear_panels_with_isa");
  if (!linear_isa_supported(isa)) throw std::invalid_argument("linear_panels_with_isa: this CPU lacks that variant");
  if (n_tokens <= 0) return;
  range_isa(isa, x, wp, type, y, n_tokens, n_in, n_out, 0, n_panels(n_out));
}

}  // namespace specchat::cpu

// Section (a) of the GPU check: every CUDA op against its CPU twin on seeded random inputs at
// 7B-like shapes (sizes deliberately not all multiples of 32), with the device time per call.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "app/gpu_bench/bench.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/kv_compact.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/matmul_typed.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/kv_compact.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/quant.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/sampling.h"

namespace specchat::bench {

namespace {

// A device buffer freed on scope exit (errors on free are ignored: destructors do not throw).
class Dev {
 public:
  explicit Dev(size_t bytes) { SPECCHAT_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(bytes, 1))); }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p_); }

 private:
  void* p_ = nullptr;
};

template <class T>
void upload(const Dev& d, const std::vector<T>& h) {
  SPECCHAT_CUDA_CHECK(cudaMemcpy(d.as<void>(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T>
std::vector<T> download(const Dev& d, size_t n) {
  std::vector<T> h(n);
  SPECCHAT_CUDA_CHECK(cudaMemcpy(h.data(), d.as<void>(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

std::vector<float> randv(size_t n, uint64_t seed, float a = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = cpu::random_value(seed, static_cast<int64_t>(i), a);
  return v;
}

// max |got − want| / max |want|: error relative to the output's scale (llama.cpp's
// test-backend-ops compares backends by a normalized error the same way).
double norm_err(const std::vector<float>& got, const std::vector<float>& want) {
  double e = 0, s = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    e = std::max(e, std::fabs(static_cast<double>(got[i]) - want[i]));
    s = std::max(s, std::fabs(static_cast<double>(want[i])));
  }
  return s > 0 ? e / s : e;
}

template <class T>
double mismatch_frac(const std::vector<T>& got, const std::vector<T>& want) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
  return want.empty() ? 0.0 : static_cast<double>(bad) / static_cast<double>(want.size());
}

// Mean device time of one call in µs (2 warm-up calls, then `reps` timed with events).
template <class F>
double time_us(cudaStream_t st, F f, int reps = 20) {
  f();
  f();
  cudaEvent_t a, b;
  SPECCHAT_CUDA_CHECK(cudaEventCreate(&a));
  SPECCHAT_CUDA_CHECK(cudaEventCreate(&b));
  SPECCHAT_CUDA_CHECK(cudaEventRecord(a, st));
  for (int i = 0; i < reps; ++i) f();
  SPECCHAT_CUDA_CHECK(cudaEventRecord(b, st));
  SPECCHAT_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  SPECCHAT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 1000.0 * ms / reps;
}

void add_row(Report& rep, const char* op, const std::string& shape, const char* dtype, double err, double tol,
             double us) {
  const bool pass = err <= tol;
  std::printf("  %-14s %-28s %-5s %10.3g %8.1g %-4s %10.1f\n", op, shape.c_str(), dtype, err, tol,
              pass ? "ok" : "FAIL", us);
  rep.section("ops").push_back(Row()
                                   .str("op", op)
                                   .str("shape", shape)
                                   .str("dtype", dtype)
                                   .num("max_norm_err", err)
                                   .num("tolerance", tol)
                                   .boolean("pass", pass)
                                   .num("gpu_us", us));
}

std::string dims(std::initializer_list<long> d) {
  std::string s;
  for (long x : d) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

}  // namespace

bool bench_ops(Report& rep) {
  cudaStream_t st = nullptr;
  SPECCHAT_CUDA_CHECK(cudaStreamCreate(&st));
  std::printf("\n(a) ops: CUDA vs CPU twin (max normalized error = max|gpu-cpu| / max|cpu|)\n");
  std::printf("  %-14s %-28s %-5s %10s %8s %-4s %10s\n", "op", "shape", "dtype", "max_err", "tol", "", "gpu_us");
  bool all_ok = true;
  auto track = [&](double err, double tol) { all_ok = all_ok && err <= tol; };

  {  // rmsnorm: f32, one block per row; tolerance: f32 sums in another order
    const int n = 17, d = 4096;
    auto x = randv(size_t{n} * d, 1), w = randv(d, 2);
    std::vector<float> want(x.size());
    cpu::rmsnorm(x.data(), w.data(), want.data(), n, d, 1e-5f);
    Dev dx(x.size() * 4), dw(w.size() * 4), dy(x.size() * 4);
    upload(dx, x);
    upload(dw, w);
    const double us = time_us(st, [&] { cuda::rmsnorm(dx.as<float>(), dw.as<float>(), dy.as<float>(), n, d, 1e-5f, st); });
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    const double e = norm_err(download<float>(dy, x.size()), want);
    track(e, 1e-5);
    add_row(rep, "rmsnorm", dims({n, d}), "f32", e, 1e-5, us);
  }
  {  // rope: angles in double on both sides; tolerance: f32 sin/cos products
    const int n = 17, nh = 32, hd = 128;
    auto x = randv(size_t{n} * nh * hd, 3);
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = 1000 + i * 37;
    std::vector<float> want = x;
    cpu::rope(want.data(), pos.data(), n, nh, hd, 10000.0f);
    Dev dx(x.size() * 4), dp(pos.size() * 4);
    upload(dp, pos);
    const double us = time_us(st, [&] {
      SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(dx.as<float>(), x.data(), x.size() * 4, cudaMemcpyHostToDevice, st));
      cuda::rope(dx.as<float>(), dp.as<int32_t>(), n, nh, hd, 10000.0f, st);
    });
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    const double e = norm_err(download<float>(dx, x.size()), want);
    track(e, 1e-5);
    add_row(rep, "rope(+upload)", dims({n, nh, hd}), "f32", e, 1e-5, us);
  }
  {  // swiglu and add: element-wise f32; expf may differ in the last ulp
    const int64_t n = 17 * 11008;
    auto g = randv(static_cast<size_t>(n), 4, 4.0f), u = randv(static_cast<size_t>(n), 5);
    std::vector<float> want(g.size()), want_add = g;
    cpu::swiglu(g.data(), u.data(), want.data(), n);
    cpu::add_inplace(want_add.data(), u.data(), n);
    Dev dg(g.size() * 4), du(u.size() * 4), dy(g.size() * 4);
    upload(dg, g);
    upload(du, u);
    double us = time_us(st, [&] { cuda::swiglu(dg.as<float>(), du.as<float>(), dy.as<float>(), n, st); });
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    double e = norm_err(download<float>(dy, g.size()), want);
    track(e, 1e-6);
    add_row(rep, "swiglu", dims({17, 11008}), "f32", e, 1e-6, us);
    cuda::add_inplace(dg.as<float>(), du.as<float>(), n, st);
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    e = norm_err(download<float>(dg, g.size()), want_add);
    us = time_us(st, [&] { cuda::add_inplace(dy.as<float>(), du.as<float>(), n, st); });
    track(e, 0.0);
    add_row(rep, "add_inplace", dims({17, 11008}), "f32", e, 0.0, us);
  }
  {  // embedding gather: exact widening
    const int nv = 32000, d = 4096, n = 17;
    std::vector<uint16_t> table(size_t{nv} * d);
    cpu::random_fill(table.data(), DType::f16, static_cast<int64_t>(table.size()), 6, 1.0f);
    std::vector<int32_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = (i * 7919 + 13) % nv;
    std::vector<float> want(size_t{n} * d);
    cpu::embedding_gather(table.data(), DType::f16, ids.data(), want.data(), n, d);
    Dev dt(table.size() * 2), di(ids.size() * 4), dy(want.size() * 4);
    upload(dt, table);
    upload(di, ids);
    const double us = time_us(st, [&] {
      cuda::embedding_gather(dt.as<void>(), DType::f16, di.as<int32_t>(), dy.as<float>(), n, d, st);
    });
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    const double e = norm_err(download<float>(dy, want.size()), want);
    track(e, 0.0);
    add_row(rep, "embedding", dims({n, d}) + " of " + std::to_string(nv), "f16", e, 0.0, us);
  }
  {  // matmul through cuBLAS: both round x to the weight type; CPU sums in double, GPU in f32
    cuda::Blas blas;
    struct Case { int n, n_in, n_out; DType dt; };
    const Case cases[] = {{1, 4096, 4096, DType::f16}, {1, 4096, 11008, DType::f16}, {17, 4096, 4096, DType::f16},
                          {64, 4096, 4096, DType::f16}, {1, 4096, 4096, DType::bf16}, {1, 11008, 4096, DType::f16},
                          {1, 4096, 32000, DType::f16}};
    for (const Case& c : cases) {
      auto x = randv(size_t(c.n) * c.n_in, 7);
      std::vector<uint16_t> w(size_t(c.n_out) * c.n_in);
      cpu::random_fill(w.data(), c.dt, static_cast<int64_t>(w.size()), 8, 1.0f / std::sqrt(float(c.n_in)));
      std::vector<float> want(size_t(c.n) * c.n_out);
      cpu::matmul(x.data(), w.data(), c.dt, want.data(), c.n, c.n_in, c.n_out, nullptr, 0);
      const size_t sb = cuda::matmul_scratch_bytes(c.dt, c.n, c.n_in);
      Dev dx(x.size() * 4), dw(w.size() * 2), dy(want.size() * 4), ds(sb);
      upload(dx, x);
      upload(dw, w);
      const double us = time_us(st, [&] {
        cuda::matmul(blas, dx.as<float>(), dw.as<void>(), c.dt, dy.as<float>(), c.n, c.n_in, c.n_out, ds.as<void>(), sb, st);
      });
      SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
      const double e = norm_err(download<float>(dy, want.size()), want);
      track(e, 1e-4);
      add_row(rep, "matmul", dims({c.n, c.n_in, c.n_out}), dtype_name(c.dt), e, 1e-4, us);
    }
  }
  // Attention: a binary tree of 17 nodes after a 1000-token prefix (GQA 32/8), and one decode
  // row of the 7B shape (32/32 heads) at 192 and 1024 keys (the decode share of section (b)).
  struct AttCase { int n, nh, nkv, p0; };
  for (const AttCase ac : {AttCase{17, 32, 8, 1000}, AttCase{1, 32, 32, 191}, AttCase{1, 32, 32, 1023}}) {
    const int n = ac.n, nh = ac.nh, nkv = ac.nkv, hd = 128, p0 = ac.p0, n_ctx = p0 + n;
    const int n_masked = n;  // n_prefix = kv_pos0
    auto q = randv(size_t(n) * nh * hd, 9), k = randv(size_t(n_ctx) * nkv * hd, 10), v = randv(size_t(n_ctx) * nkv * hd, 11);
    std::vector<uint8_t> vis(size_t(n) * n_masked, 0);
    for (int i = 0; i < n; ++i) {
      for (int j = i; j >= 0; j = j == 0 ? -1 : (j - 1) / 2) vis[size_t(i) * n_masked + j] = 1;
    }
    std::vector<float> want(q.size()), scratch(n_ctx);
    cpu::AttentionArgs a{q.data(), k.data(), v.data(), nkv * hd, p0, p0, n, nh, nkv, hd, vis.data(), want.data(), scratch.data()};
    cpu::attention(a);
    Dev dq(q.size() * 4), dk(k.size() * 4), dv(v.size() * 4), dm(vis.size()), dy(q.size() * 4);
    upload(dq, q);
    upload(dk, k);
    upload(dv, v);
    upload(dm, vis);
    cuda::AttentionArgs g{dq.as<float>(), dk.as<float>(), dv.as<float>(), nkv * hd, p0, p0, n, nh, nkv, hd,
                          dm.as<uint8_t>(), dy.as<float>(), nullptr};
    const double us = time_us(st, [&] { cuda::attention(g, st); });
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    const double e = norm_err(download<float>(dy, q.size()), want);
    track(e, 1e-5);
    add_row(rep, "attention", dims({n, nh, hd}) + " kv " + std::to_string(n_ctx) + " gqa " + std::to_string(nh) + "/" +
                                  std::to_string(nkv), "f32", e, 1e-5, us);
  }
  {  // sampling helpers on 3 rows of a 32000 vocabulary
    const int rows = 3, nv = 32000, k = 40;
    auto x = randv(size_t{rows} * nv, 12, 8.0f);
    std::vector<float> sm = x;
    cpu::softmax_rows(sm.data(), rows, nv);
    std::vector<int32_t> am(rows), tk(size_t{rows} * k);
    std::vector<float> tv(size_t{rows} * k);
    cpu::argmax_rows(x.data(), rows, nv, am.data());
    cpu::topk_rows(x.data(), rows, nv, k, tk.data(), tv.data());
    Dev dx(x.size() * 4), dy(x.size() * 4), di(size_t{rows} * k * 4), dv(size_t{rows} * k * 4);
    upload(dx, x);
    double us = time_us(st, [&] {
      SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(dy.as<float>(), dx.as<float>(), x.size() * 4, cudaMemcpyDeviceToDevice, st));
      cuda::softmax_rows(dy.as<float>(), rows, nv, st);
    });
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    double e = norm_err(download<float>(dy, x.size()), sm);
    track(e, 1e-5);
    add_row(rep, "softmax(+copy)", dims({rows, nv}), "f32", e, 1e-5, us);
    us = time_us(st, [&] { cuda::argmax_rows(dx.as<float>(), rows, nv, di.as<int32_t>(), st); });
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    e = mismatch_frac(download<int32_t>(di, rows), am);
    track(e, 0.0);
    add_row(rep, "argmax", dims({rows, nv}), "f32", e, 0.0, us);
    us = time_us(st, [&] { cuda::topk_rows(dx.as<float>(), rows, nv, k, di.as<int32_t>(), dv.as<float>(), st); });
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    e = mismatch_frac(download<int32_t>(di, size_t{rows} * k), tk);
    track(e, 0.0);
    add_row(rep, "topk(k=40)", dims({rows, nv}), "f32", e, 0.0, us);
  }
  {  // KV path compaction: exact copies, in place
    const int nl = 32, n_ctx = 300, row = 4096, base = 200;
    const std::vector<int32_t> path = {base + 0, base + 2, base + 3, base + 7, base + 9, base + 12};
    auto cache = randv(size_t{nl} * n_ctx * row, 13);
    std::vector<float> want = cache;
    cpu::kv_compact(want.data(), nl, int64_t{n_ctx} * row, row, row, path.data(), static_cast<int>(path.size()), base);
    Dev dc(cache.size() * 4), dp(path.size() * 4);
    upload(dc, cache);
    upload(dp, path);
    cuda::kv_compact(dc.as<float>(), nl, int64_t{n_ctx} * row, row, row, dp.as<int32_t>(), static_cast<int>(path.size()), base, st);
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    const double e = norm_err(download<float>(dc, cache.size()), want);
    const double us = time_us(st, [&] {
      cuda::kv_compact(dc.as<float>(), nl, int64_t{n_ctx} * row, row, row, dp.as<int32_t>(), static_cast<int>(path.size()), base, st);
    });
    track(e, 0.0);
    add_row(rep, "kv_compact", std::to_string(path.size()) + " rows x " + std::to_string(nl) + " layers", "f32", e, 0.0, us);
  }
  // Block weight types: dequantize-and-dot (decode: 1 row; verification: 8 rows) against the CPU
  // twin cpu::linear (its f32-activation path, as the CUDA kernels keep activations in f32) on
  // the same quantized 4096 x 4096 matrix; the op name carries the weight
  // bytes read per second of device time. Tolerance: f32 sums in other orders (1e-5 normalized).
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q5_k, DType::q6_k}) {
    const int n_in = 4096, n_out = 4096;
    const auto wf = randv(size_t{n_in} * n_out, 20, 0.02f);
    std::vector<uint8_t> q(dtype_row_bytes(t, n_in) * n_out);
    cpu::quantize_row(t, wf.data(), q.data(), static_cast<int64_t>(wf.size()));
    Dev dq(q.size());
    upload(dq, q);
    for (int n : {1, 8}) {
      const auto x = randv(size_t(n) * n_in, 21);
      std::vector<float> want(size_t(n) * n_out);
      cpu::linear(x.data(), q.data(), t, want.data(), n, n_in, n_out, nullptr, cpu::Activations::f32);
      Dev dx(x.size() * 4), dy(want.size() * 4);
      upload(dx, x);
      const double us = time_us(st, [&] {
        cuda::quant_matmul(dx.as<float>(), dq.as<void>(), t, dy.as<float>(), n, n_in, n_out, st);
      });
      SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
      const double e = norm_err(download<float>(dy, want.size()), want);
      track(e, 1e-5);
      char op[48];
      std::snprintf(op, sizeof op, "qmatmul %.0fGB/s", static_cast<double>(q.size()) / (us * 1e-6) / 1e9);
      add_row(rep, op, dims({n, n_in, n_out}), dtype_name(t), e, 1e-5, us);
    }
  }
  // Issue 11: verification batches on block weights, the dequantize-and-dot kernel (reads W once
  // per 8 rows) against dequantizing W to F16 once and one cuBLAS GEMM (which rounds x to f16),
  // on a 4096 x 32000 matrix (the output projection's shape; larger than the 50 MB L2 in q8_0,
  // 74 MB in q4_K) with random blocks made on the device. The dequantize-and-dot kernel is the
  // reference here (it is held to the CPU twin above); the F16 path gets the F16 tolerance.
  {
    cuda::Blas blas;
    const int n_in = 4096, n_out = 32000;
    for (DType t : {DType::q8_0, DType::q4_k}) {
      const int64_t nw = int64_t{n_in} * n_out;
      const size_t qbytes = dtype_row_bytes(t, static_cast<uint64_t>(nw));
      Dev dq(qbytes), dh(static_cast<size_t>(nw) * 2);
      cuda::random_fill_blocks(dq.as<void>(), t, nw, 23, 1.0f / 64.0f, st);
      const size_t sb = cuda::matmul_scratch_bytes(DType::f16, 64, n_in);
      Dev ds(sb);
      for (int n : {1, 8, 16, 32, 64}) {
        const auto x = randv(size_t(n) * n_in, 24);
        Dev dx(x.size() * 4), dy(size_t(n) * n_out * 4), dy2(size_t(n) * n_out * 4);
        upload(dx, x);
        const double us_q = time_us(st, [&] {
          cuda::quant_matmul(dx.as<float>(), dq.as<void>(), t, dy.as<float>(), n, n_in, n_out, st);
        });
        const double us_h = time_us(st, [&] {
          cuda::dequantize_f16(dq.as<void>(), t, dh.as<void>(), nw, st);
          cuda::matmul(blas, dx.as<float>(), dh.as<void>(), DType::f16, dy2.as<float>(), n, n_in, n_out, ds.as<void>(),
                       sb, st);
        });
        SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
        const auto ref = download<float>(dy, size_t(n) * n_out);
        const double e = norm_err(download<float>(dy2, ref.size()), ref);
        track(e, 1e-2);
        char op[48];
        std::snprintf(op, sizeof op, "qmatmul %.0fGB/s", static_cast<double>(qbytes) / (us_q * 1e-6) / 1e9);
        add_row(rep, op, dims({n, n_in, n_out}), dtype_name(t), 0.0, 1e-5, us_q);
        add_row(rep, "dq_f16+cublas", dims({n, n_in, n_out}), dtype_name(t), e, 1e-2, us_h);
      }
    }
  }
  cudaStreamDestroy(st);
  return all_ok;
}

}  // namespace specchat::bench

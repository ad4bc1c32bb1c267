// Section (b) of the GPU check: decode speed, bandwidth use and tree-verify cost per model.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "app/gpu_bench/bench.h"
#include "app/gpu_bench/common.h"
#include "engine/op_profile.h"
#include "engine/quantize.h"
#include "kernels/cuda/check.h"

namespace specchat::bench {

namespace {

constexpr int kTreeSizes[] = {1, 8, 16, 32, 64};

// Decodes n_decode tokens one forward at a time after an n_prompt prefill, then verifies
// trees of kTreeSizes nodes at that context length (trees are not committed).
// embd_type: the token table's element type (only one of its rows is read per token).
void bench_model(Report& rep, const std::string& name, LlamaModel& m, int n_prompt, int n_decode, double bw_gbs,
                 DType embd_type = DType::f16) {
  const ModelConfig& c = m.config();
  const std::vector<int32_t> ids = prompt_ids(n_prompt + n_decode, c.n_vocab);
  m.kv().truncate(0);
  m.sync_cache(ids, n_prompt, false);
  for (int w = 0; w < 2; ++w) m.forward(Batch::chain(std::span(ids).subspan(static_cast<size_t>(n_prompt), 1), n_prompt, false));
  const auto t0 = Clock::now();
  for (int i = 0; i < n_decode; ++i) {
    const auto one = std::span(ids).subspan(static_cast<size_t>(n_prompt + i), 1);
    m.forward(Batch::chain(one, m.kv().size(), false));
    m.kv().commit(one);
  }
  const double decode_ms = ms_since(t0) / n_decode;
  const MemoryInfo mem = m.memory();
  // Weights read per token: everything but the embedding table, of which one row is read.
  // KV reads are not counted (small at these lengths).
  const double row_bytes = static_cast<double>(dtype_row_bytes(embd_type, static_cast<uint64_t>(c.d_model)));
  const double bytes_tok = static_cast<double>(mem.weights_bytes) - static_cast<double>(c.n_vocab - 1) * row_bytes;
  const double tps = 1000.0 / decode_ms;
  const double gbs = bytes_tok * tps / 1e9;
  std::printf("  %-22s decode %8.3f ms/token %9.1f tok/s %8.1f GB/s (%5.1f%% of %.0f GB/s), ctx %d\n",
              name.c_str(), decode_ms, tps, gbs, bw_gbs > 0 ? 100.0 * gbs / bw_gbs : 0.0, bw_gbs, m.kv().size());
  Row row;
  row.str("model", name)
      .str("embd_type", dtype_name(embd_type))
      .num("weights_bytes", static_cast<double>(mem.weights_bytes))
      .num("kv_bytes", static_cast<double>(mem.kv_bytes))
      .num("activation_bytes", static_cast<double>(mem.activation_bytes))
      .num("context_tokens", m.kv().size())
      .num("decode_ms", decode_ms)
      .num("tokens_per_s", tps)
      .num("weight_bytes_per_token", bytes_tok)
      .num("achieved_gbs", gbs)
      .num("device_bandwidth_gbs", bw_gbs)
      .num("bandwidth_fraction", bw_gbs > 0 ? gbs / bw_gbs : 0.0);
  std::printf("  %-22s tree verify ms (x 1-token decode):", "");
  for (int n : kTreeSizes) {
    if (n > m.max_batch()) continue;
    const Batch b = tree_batch(n, m.kv().size(), c.n_vocab);
    m.forward(b);  // warm-up
    const int reps = 8;
    const auto t1 = Clock::now();
    for (int r = 0; r < reps; ++r) m.forward(b);
    const double ms = ms_since(t1) / reps;
    std::printf("  %d: %.3f (%.2fx)", n, ms, ms / decode_ms);
    row.num("tree" + std::to_string(n) + "_ms", ms).num("tree" + std::to_string(n) + "_rel", ms / decode_ms);
  }
  std::printf("\n");
  // Where a decode step's device time goes: CUDA events between operations over 16 more decode
  // forwards (OpProfile; gaps where the GPU waits for the host count toward the next op).
  OpProfile prof;
  if (m.set_profile(&prof)) {
    m.kv().truncate(static_cast<int>(n_prompt));
    const int n_prof = 16;
    for (int i = 0; i < n_prof; ++i) {
      const auto one = std::span(ids).subspan(static_cast<size_t>(n_prompt + i), 1);
      m.forward(Batch::chain(one, m.kv().size(), false));
      m.kv().commit(one);
    }
    m.set_profile(nullptr);
    std::vector<const OpProfile::Entry*> order;
    for (const OpProfile::Entry& e : prof.ops) {
      if (e.calls > 0) order.push_back(&e);
    }
    std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->ms > b->ms; });
    std::printf("  %-22s device ms/token by op (sum %.3f):", "", prof.total_ms() / n_prof);
    int shown = 0;
    for (const OpProfile::Entry* e : order) {
      std::printf("%s %s %.3f", shown % 4 == 0 ? "\n   " : " |", e->name.c_str(), e->ms / n_prof);
      ++shown;
      row.num("profile_ms_per_token " + e->name, e->ms / n_prof);
    }
    std::printf("\n");
    row.num("profile_device_ms_per_token", prof.total_ms() / n_prof);
  }
  rep.section("models").push_back(row);
}

}  // namespace

bool bench_models(Report& rep, const std::string& models_dir, bool with_7b) {
  const cuda::DeviceInfo info = cuda::device_info(0);
  std::printf("\n(b) models on %s: decode speed, achieved bandwidth (device %.0f GB/s%s), tree verify\n",
              info.name.c_str(), info.bandwidth_gbs, info.bandwidth_from_table ? ", from the name table" : "");
  rep.section("device").push_back(Row()
                                      .str("name", info.name)
                                      .num("cc_major", info.cc_major)
                                      .num("cc_minor", info.cc_minor)
                                      .num("sm_count", info.sm_count)
                                      .num("total_bytes", static_cast<double>(info.total_bytes))
                                      .num("bandwidth_gbs", info.bandwidth_gbs)
                                      .boolean("bandwidth_from_table", info.bandwidth_from_table));
  LlamaModel::Options o;
  o.backend = BackendKind::cuda;
  o.max_batch = 64;
  for (const char* role : {"target", "draft"}) {
    auto m = LlamaModel::load(models_dir + "/specchat-" + role + ".gguf", o);
    bench_model(rep, std::string("bundled ") + role, *m, 64, 96, info.bandwidth_gbs);
  }
  if (with_7b) {
    ModelConfig c;
    c.n_vocab = 32000;
    c.d_model = 4096;
    c.n_layer = 32;
    c.n_head = 32;
    c.n_head_kv = 32;
    c.head_dim = 128;
    c.d_ff = 11008;
    c.n_ctx_train = 4096;
    LlamaModel::Options o7 = o;
    o7.n_ctx = 1024;
    const auto t0 = Clock::now();
    auto m = LlamaModel::random(c, o7, 42);
    std::printf("  random 7B (F16, made on the device) ready in %.0f ms: %.2f GB weights\n", ms_since(t0),
                static_cast<double>(m->memory().weights_bytes) / 1e9);
    bench_model(rep, "random 7B f16", *m, 128, 64, info.bandwidth_gbs);
    m.reset();
    // The same shape in the block types of llama.cpp's Q4_K_M and Q8_0 files (random bytes,
    // fixed scales: issue 11's HBM-roofline row for the dequantize-and-dot kernels).
    for (QuantPreset p : {QuantPreset::q4_k_m, QuantPreset::q8_0}) {
      const auto t1 = Clock::now();
      auto mq = LlamaModel::random(c, o7, 42, p);
      std::printf("  random 7B (%s, made on the device) ready in %.0f ms: %.2f GB weights\n", quant_preset_name(p),
                  ms_since(t1), static_cast<double>(mq->memory().weights_bytes) / 1e9);
      const DType embd = quant_tensor_type(p, "token_embd.weight", {static_cast<uint64_t>(c.d_model),
                                                                   static_cast<uint64_t>(c.n_vocab)},
                                           DType::f16, c.n_layer);
      bench_model(rep, std::string("random 7B ") + quant_preset_name(p), *mq, 128, 64, info.bandwidth_gbs, embd);
    }
  }
  return true;
}

}  // namespace specchat::bench

// [cuda] tests of the CUDA backend against the CPU backend on the bundled models: logits,
// lossless speculative decoding on the GPU, KV compaction and memory accounting. The runner
// (cuda_test_main.cpp) skips all of them, exit 77, when no device is usable.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/op_profile.h"

using namespace specchat;

namespace {

// The bundled models, found from this file's path (test_cuda has no test-path definitions and
// runs on a machine with only the source tree); $SPECCHAT_MODELS overrides.
std::string models_dir() {
  if (const char* s = std::getenv("SPECCHAT_MODELS")) return s;
  std::string f = __FILE__;  // <root>/tests/cuda/test_backend.cpp
  for (int i = 0; i < 3; ++i) f = f.substr(0, f.find_last_of('/'));
  return f + "/resources/models";
}
std::string target_path() { return models_dir() + "/specchat-target.gguf"; }
std::string draft_path() { return models_dir() + "/specchat-draft.gguf"; }

// Logit tolerance, max|gpu − cpu| / max|cpu|, by weight dtype. Both backends use the same
// weight values; the GPU also rounds every matmul input (the activations) to the weight type,
// because cublasGemmEx takes one input type, and sums in f32 in another order. Per element that
// is a relative error of 2^-11 (F16) or 2^-8 (BF16) at each of n_layer · 7 + 1 products, partly
// averaging out: 1e-2 for F16 and 8× that for BF16 (3 fewer mantissa bits).
constexpr double kTolF16 = 1e-2;
[[maybe_unused]] constexpr double kTolBF16 = 8e-2;

double norm_err(std::span<const float> gpu, const std::vector<float>& cpu) {
  double e = 0, s = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    e = std::max(e, std::fabs(static_cast<double>(gpu[i]) - cpu[i]));
    s = std::max(s, std::fabs(static_cast<double>(cpu[i])));
  }
  return s > 0 ? e / s : e;
}

std::unique_ptr<LlamaModel> load(const std::string& path, BackendKind k, int n_ctx = 0) {
  LlamaModel::Options o;
  o.backend = k;
  o.n_ctx = n_ctx;
  return LlamaModel::load(path, o);
}

std::vector<int32_t> prompt(int n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i == 0 ? 1 : 7 + (i * 331) % 4000;
  return ids;
}

GenerationResult generate(LlamaModel& target, LlamaModel* draft, const GenerateRequest& req) {
  target.kv().truncate(0);
  if (draft) draft->kv().truncate(0);
  Generator g(target, draft);
  return g.generate(req);
}

// A small llama shape (widths not multiples of 32) for random-weight models on both backends.
ModelConfig small_random_config() {
  ModelConfig c;
  c.n_vocab = 301;
  c.d_model = 200;
  c.n_layer = 3;
  c.n_head = 5;
  c.n_head_kv = 5;
  c.head_dim = 40;
  c.d_ff = 333;
  c.n_ctx_train = 64;
  return c;
}

}  // namespace

TEST_CASE("GPU logits match the CPU backend on the bundled models", "[cuda][backend]") {
  for (const std::string& path : {target_path(), draft_path()}) {
    auto cpu = load(path, BackendKind::cpu);
    auto gpu = load(path, BackendKind::cuda);
    REQUIRE(gpu->backend_kind() == BackendKind::cuda);
    const std::vector<int32_t> ids = prompt(41);
    const Batch chain = Batch::chain(ids, 0, true);
    const auto lc = cpu->forward(chain);
    const std::vector<float> want(lc.begin(), lc.end());
    INFO(path);
    CHECK(norm_err(gpu->forward(chain), want) <= kTolF16);
    // A tree after the chain (both caches hold the chain's rows): node i's parent (i − 1) / 2,
    // out_rows in a non-contiguous order (exercises the per-row final norm).
    Batch t;
    t.kv_pos0 = 41;
    for (int i = 0; i < 13; ++i) {
      t.tokens.push_back(11 + 97 * i);
      t.parent.push_back(i == 0 ? -1 : (i - 1) / 2);
      t.pos.push_back(41 + (i == 0 ? 0 : i < 3 ? 1 : i < 7 ? 2 : 3));
    }
    t.out_rows = {12, 0, 5, 6};
    const auto tc = cpu->forward(t);
    const std::vector<float> want_t(tc.begin(), tc.end());
    CHECK(norm_err(gpu->forward(t), want_t) <= kTolF16);
  }
}

TEST_CASE("a random model is the same on the GPU and the CPU", "[cuda][backend]") {
  const ModelConfig c = small_random_config();
  LlamaModel::Options o;
  auto cpu = LlamaModel::random(c, o, 99);
  o.backend = BackendKind::cuda;
  auto gpu = LlamaModel::random(c, o, 99);
  const std::vector<int32_t> ids = {1, 5, 300, 42, 17, 250, 3};
  const auto lc = cpu->forward(Batch::chain(ids, 0, true));
  const std::vector<float> want(lc.begin(), lc.end());
  CHECK(norm_err(gpu->forward(Batch::chain(ids, 0, true)), want) <= kTolF16);
}

TEST_CASE("GPU per-operation profile: device time per op, logits unchanged, nothing recorded once stopped", "[cuda][backend]") {
  const ModelConfig c = small_random_config();
  LlamaModel::Options o;
  o.backend = BackendKind::cuda;
  auto gpu = LlamaModel::random(c, o, 7);
  const std::vector<int32_t> ids = {1, 5, 300, 42, 17};
  const auto l0 = gpu->forward(Batch::chain(ids, 0, true));
  const std::vector<float> plain(l0.begin(), l0.end());
  OpProfile prof;
  REQUIRE(gpu->set_profile(&prof));
  const auto l1 = gpu->forward(Batch::chain(ids, 0, true));
  CHECK(std::vector<float>(l1.begin(), l1.end()) == plain);
  CHECK(prof.forwards == 1);
  CHECK(prof.rows == 5);
  for (OpProfile::Op op : {OpProfile::embed, OpProfile::norm, OpProfile::matmul_qkv, OpProfile::rope,
                           OpProfile::kv_write, OpProfile::attention, OpProfile::matmul_o, OpProfile::residual,
                           OpProfile::matmul_gate_up, OpProfile::swiglu, OpProfile::matmul_down,
                           OpProfile::matmul_head, OpProfile::copy_out}) {
    CAPTURE(prof.ops[op].name);
    CHECK(prof.ops[op].calls > 0);
    CHECK(prof.ops[op].ms >= 0.0);
  }
  CHECK(prof.ops[OpProfile::matmul_qkv].calls == c.n_layer);
  CHECK(prof.ops[OpProfile::norm].calls == 2 * c.n_layer + 1);
  CHECK(prof.total_ms() > 0.0);
  REQUIRE(gpu->set_profile(nullptr));
  gpu->forward(Batch::chain(ids, 0, true));
  CHECK(prof.forwards == 1);
}

TEST_CASE("greedy speculative decoding on the GPU equals baseline for a chain and a tree", "[cuda][backend]") {
  auto target = load(target_path(), BackendKind::cuda);
  auto draft = load(draft_path(), BackendKind::cuda, target->n_ctx());
  GenerateRequest req;
  req.prompt = prompt(20);
  req.max_tokens = 64;
  req.spec.draft_k = 0;
  const GenerationResult base = generate(*target, draft.get(), req);
  REQUIRE(base.tokens.size() >= 8);  // EOS may end it early; the comparison needs some tokens
  req.spec.draft_k = 4;
  req.spec.tree.mode = TreeMode::chain;
  const GenerationResult chain = generate(*target, draft.get(), req);
  CHECK(chain.tokens == base.tokens);
  CHECK(chain.stats.n_drafted > 0);
  req.spec.tree.mode = TreeMode::dynamic;
  req.spec.tree.node_budget = 16;
  req.spec.tree.depth = 5;
  req.spec.tree.branch = 3;
  const GenerationResult tree = generate(*target, draft.get(), req);
  CHECK(tree.tokens == base.tokens);
  CHECK(tree.stats.n_accepted > 0);
  // The draft on the CPU serves a GPU target just as well (lossless either way).
  auto draft_cpu = load(draft_path(), BackendKind::cpu, target->n_ctx());
  const GenerationResult mixed = generate(*target, draft_cpu.get(), req);
  CHECK(mixed.tokens == base.tokens);
}

TEST_CASE("KV path compaction on the GPU equals feeding the kept path as a chain", "[cuda][backend]") {
  auto m = load(target_path(), BackendKind::cuda);
  auto ref = load(target_path(), BackendKind::cuda);
  const std::vector<int32_t> pre = prompt(9);
  m->kv().truncate(0);
  m->forward(Batch::chain(pre, 0, false));
  m->kv().commit(pre);
  // Tree: 0 = a (root), 1 = b (child of 0), 2 = c (child of 0), 3 = d (child of 2); keep a, c, d.
  Batch t;
  t.tokens = {100, 200, 300, 400};
  t.parent = {-1, 0, 0, 2};
  t.pos = {9, 10, 10, 11};
  t.kv_pos0 = 9;
  m->forward(t);
  const std::vector<int32_t> path = {0, 2, 3}, kept = {100, 300, 400};
  m->kv().keep_path(path, kept);
  REQUIRE(m->kv().size() == 12);
  const int32_t next[1] = {55};
  const auto lm = m->forward(Batch::chain(next, 12, false));
  const std::vector<float> got(lm.begin(), lm.end());
  std::vector<int32_t> full = pre;
  full.insert(full.end(), kept.begin(), kept.end());
  full.push_back(55);
  ref->kv().truncate(0);
  const auto lr = ref->forward(Batch::chain(full, 0, false));
  const std::vector<float> want(lr.begin(), lr.end());
  // Same device, same kernels; only the batch shapes of the K/V producing matmuls differ.
  CHECK(norm_err(got, want) <= 1e-3);
}

TEST_CASE("GPU memory accounting: weights as in the file, KV cache, device totals", "[cuda][backend]") {
  const int n_ctx = 128;
  auto m = load(target_path(), BackendKind::cuda, n_ctx);
  const GgufFile f = GgufFile::open(target_path());
  // The bundled files hold F16 matrices and F32 norms: the device keeps exactly those bytes.
  size_t file_bytes = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    REQUIRE((t.type == GgmlType::f16 || t.type == GgmlType::f32));
    file_bytes += t.n_bytes;
  }
  const MemoryInfo mi = m->memory();
  const ModelConfig& c = m->config();
  CHECK(mi.on_device);
  CHECK(mi.weights_bytes == file_bytes);
  CHECK(mi.kv_bytes == size_t{2} * c.n_layer * n_ctx * c.n_head_kv * c.head_dim * sizeof(float));
  CHECK(mi.activation_bytes > size_t(m->max_batch()) * c.n_vocab * sizeof(float));
  CHECK(mi.device_total_bytes > 0);
  CHECK(mi.device_used_bytes <= mi.device_total_bytes);
  CHECK(mi.device_used_bytes >= mi.weights_bytes + mi.kv_bytes);
  CHECK_FALSE(m->kv().host_rows());
  CHECK_THROWS_AS(m->kv().k(0, 0), std::logic_error);
}

TEST_CASE("GPU: several sequences in one forward match the CPU and each sequence alone", "[cuda][backend][batch]") {
  LlamaModel::Options o;
  o.n_seq = 3;
  auto cpu = LlamaModel::load(target_path(), o);
  o.backend = BackendKind::cuda;
  auto gpu = LlamaModel::load(target_path(), o);
  const std::vector<int32_t> pa = prompt(17), pb = prompt(5), pc = prompt(30);
  // Prefill the three sequences (different lengths), then one step with a chain, a tree and a
  // single row from the three sequences in one forward.
  for (auto* m : {cpu.get(), gpu.get()}) {
    m->sync_cache(pa, 16, false, 0);
    m->sync_cache(pb, 4, false, 1);
    m->sync_cache(pc, 29, false, 2);
  }
  Batch a = Batch::chain(std::vector<int32_t>{pa[16], 40, 41}, 16, true);
  a.seq = 0;
  Batch b;  // a tree after pb
  b.seq = 1;
  b.tokens = {pb[4], 100, 200, 300};
  b.parent = {-1, 0, 0, 1};
  b.pos = {4, 5, 5, 6};
  b.kv_pos0 = 4;
  b.out_rows = {3, 0, 2};
  Batch c = Batch::chain(std::vector<int32_t>{pc[29]}, 29, true);
  c.seq = 2;
  const Batch* all[3] = {&a, &b, &c};
  const std::vector<int32_t> layers = {2, kHiddenFinalNorm};
  const ForwardOut oc = cpu->forward(all, layers);
  const std::vector<float> want(oc.logits.begin(), oc.logits.end()), want_h(oc.hidden.begin(), oc.hidden.end());
  const ForwardOut og = gpu->forward(all, layers);
  CHECK(norm_err(og.logits, want) <= kTolF16);
  REQUIRE(og.hidden.size() == want_h.size());
  CHECK(norm_err(og.hidden, want_h) <= kTolF16);
  const std::vector<float> together(og.logits.begin(), og.logits.end());
  // Each sequence alone on the GPU: the same logits up to the matmul's batch shape.
  const size_t nv = static_cast<size_t>(gpu->config().n_vocab);
  size_t row = 0;
  for (const Batch* bp : all) {
    const auto alone = gpu->forward(*bp);
    const std::vector<float> want_alone(alone.begin(), alone.end());
    INFO("sequence " << bp->seq);
    CHECK(norm_err(std::span<const float>(together).subspan(row * nv, want_alone.size()), want_alone) <= 1e-3);
    row += bp->out_rows.size();
  }
  // Memory: the pool holds n_seq caches.
  const ModelConfig& cf = gpu->config();
  CHECK(gpu->memory().kv_bytes ==
        size_t{3} * 2 * cf.n_layer * gpu->n_ctx() * cf.n_head_kv * cf.head_dim * sizeof(float));
}

TEST_CASE("GPU: per-sequence KV compaction leaves the other sequences untouched", "[cuda][backend][batch]") {
  LlamaModel::Options o;
  o.n_seq = 2;
  o.backend = BackendKind::cuda;
  auto m = LlamaModel::load(target_path(), o);
  auto ref = LlamaModel::load(target_path(), o);
  const std::vector<int32_t> p0 = prompt(12), p1 = prompt(9);
  m->sync_cache(p0, 12, false, 0);
  m->sync_cache(p1, 9, false, 1);
  Batch t;  // tree in sequence 1, keep nodes 0, 2
  t.seq = 1;
  t.tokens = {100, 200, 300};
  t.parent = {-1, 0, 0};
  t.pos = {9, 10, 10};
  t.kv_pos0 = 9;
  m->forward(t);
  const std::vector<int32_t> path = {0, 2}, kept = {100, 300};
  m->kv(1).keep_path(path, kept);
  // Sequence 0 continues as if nothing happened; sequence 1 as if the path had been fed.
  for (int sq : {0, 1}) {
    std::vector<int32_t> full = sq == 0 ? p0 : p1;
    if (sq == 1) full.insert(full.end(), kept.begin(), kept.end());
    const int32_t next[1] = {55};
    Batch nb = Batch::chain(next, m->kv(sq).size(), false);
    nb.seq = sq;
    const auto lm = m->forward(nb);
    const std::vector<float> got(lm.begin(), lm.end());
    full.push_back(55);
    ref->kv(0).truncate(0);
    const auto lr = ref->forward(Batch::chain(full, 0, false));
    const std::vector<float> want(lr.begin(), lr.end());
    INFO("sequence " << sq);
    CHECK(norm_err(got, want) <= 1e-3);
  }
}

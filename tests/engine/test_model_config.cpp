// Every hyper-parameter key that changes the computation is honoured or refused (issue 11 item
// 3). Each case mutates one key (or tensor) of a small generated model (tiny_model.h) and checks
// that the engine's logits follow an independent f64 reference that reads the key as written
// (and differ from the unmutated model's), or that loading is refused with a message naming it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <functional>

#include "engine/model.h"
#include "tiny_model.h"

using namespace specchat;
using test::GgufBuilder;
using test::TinySpec;

namespace {

namespace fs = std::filesystem;

const std::vector<int32_t> kIds = {1, 759, 525, 265, 429, 4035, 398, 303, 265, 455, 518, 707};

std::string tmp_file(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("specchat-model-config-" + std::to_string(getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::vector<float> engine_logits(const GgufBuilder& b) {
  const std::string path = tmp_file("m.gguf");
  b.write_file(path);
  LlamaModel::Options o;
  o.kv_type = DType::f32;  // the f64 reference keeps K/V exact; the 1e-4 tier is for f32 rows
  auto m = LlamaModel::load(path, o);
  const auto l = m->forward(Batch::chain(kIds, 0, true));
  return {l.begin(), l.end()};
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Engine logits within 1e-4 (normalized by the largest reference logit) of the reference that
// reads the mutated file. Returns the engine's logits.
std::vector<float> check_honoured(const GgufBuilder& b) {
  const std::vector<float> got = engine_logits(b);
  const std::vector<double> ref = test::reference_logits(GgufFile::from_bytes(b.build()), kIds);
  REQUIRE(got.size() == ref.size());
  double err = 0;
  for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::fabs(got[i] - ref[i]));
  INFO("max |engine - reference| " << err << " of max |reference| " << max_abs(ref));
  CHECK(err <= 1e-4 * max_abs(ref));
  return got;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// Loading is refused with a message containing `needle` (the key or tensor at fault).
void check_refused(const GgufBuilder& b, const std::string& needle) {
  const std::string path = tmp_file("refused.gguf");
  b.write_file(path);
  try {
    LlamaModel::load(path);
    FAIL("loaded, expected a refusal naming " << needle);
  } catch (const std::exception& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}

struct Mutation {
  const char* what;
  std::function<void(GgufBuilder&)> apply;
};

}  // namespace

TEST_CASE("each architecture's forward matches the f64 reference", "[unit][model_config]") {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    for (bool tied : {false, true}) {
      INFO(arch << (tied ? " tied output" : " untied output"));
      TinySpec s;
      s.arch = arch;
      s.tied = tied;
      const GgufBuilder b = test::tiny_model(s);
      check_honoured(b);
    }
  }
  // qwen3's head width comes from attention.key_length (here 24, not 64 / 4 = 16).
  TinySpec s;
  s.arch = "qwen3";
  s.head_dim = 24;
  check_honoured(test::tiny_model(s));
}

TEST_CASE("hyper-parameter keys that change the computation are honoured", "[unit][model_config]") {
  for (const char* arch : {"llama", "qwen2"}) {
    TinySpec s;
    s.arch = arch;
    const GgufBuilder base = test::tiny_model(s);
    const std::vector<float> base_logits = engine_logits(base);
    const std::string A = std::string(arch) + ".";
    const std::vector<Mutation> cases = {
        {"rope.freq_base 100", [&](GgufBuilder& b) { b.set_f32(A + "rope.freq_base", 100.0f); }},
        {"rope.dimension_count 8 (partial rotary on a head of 16)",
         [&](GgufBuilder& b) { b.set_u32(A + "rope.dimension_count", 8); }},
        {"layer_norm_rms_epsilon 0.3", [&](GgufBuilder& b) { b.set_f32(A + "attention.layer_norm_rms_epsilon", 0.3f); }},
        {"rope.scaling linear x4",
         [&](GgufBuilder& b) {
           b.set_string(A + "rope.scaling.type", "linear");
           b.set_f32(A + "rope.scaling.factor", 4.0f);
           b.set_u32(A + "rope.scaling.original_context_length", 16);
         }},
        {"rope.scale_linear 2", [&](GgufBuilder& b) { b.set_f32(A + "rope.scale_linear", 2.0f); }},
    };
    for (const Mutation& m : cases) {
      INFO(arch << ": " << m.what);
      GgufBuilder b = base;
      m.apply(b);
      const std::vector<float> got = check_honoured(b);
      CHECK(max_diff(got, base_logits) > 1e-3);  // the key mattered
    }
  }
  // llama: rope_freqs (Llama 3.1's frequency divisors) and optional Q/K/V biases.
  TinySpec s;
  const GgufBuilder base = test::tiny_model(s);
  const std::vector<float> base_logits = engine_logits(base);
  {
    INFO("llama rope_freqs");
    GgufBuilder b = base;
    b.add_tensor_f32("rope_freqs.weight", {8}, {1, 1, 1.5f, 2, 4, 8, 8, 8});
    CHECK(max_diff(check_honoured(b), base_logits) > 1e-3);
  }
  {
    INFO("llama with Q/K/V biases");
    GgufBuilder b = base;
    for (int il = 0; il < s.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      b.add_tensor_f32(p + "attn_q.bias", {64}, std::vector<float>(64, 0.3f));
      b.add_tensor_f32(p + "attn_k.bias", {32}, std::vector<float>(32, -0.2f));
      b.add_tensor_f32(p + "attn_v.bias", {32}, std::vector<float>(32, 0.1f));
    }
    CHECK(max_diff(check_honoured(b), base_logits) > 1e-3);
  }
  // Keys present with values that change nothing: the same logits as without them.
  {
    INFO("neutral values: vocab_size = 4096, sliding_window = context, scaling none, factor 1");
    GgufBuilder b = base;
    b.set_u32("llama.vocab_size", 4096);
    b.set_u32("llama.attention.sliding_window", 64);
    b.set_string("llama.rope.scaling.type", "none");
    b.set_f32("llama.rope.scaling.factor", 1.0f);
    b.set_u32("llama.expert_count", 0);
    CHECK(max_diff(check_honoured(b), base_logits) == 0);
  }
}

TEST_CASE("hyper-parameter keys SpecChat does not run are refused, naming the key", "[unit][model_config]") {
  TinySpec s;
  const GgufBuilder base = test::tiny_model(s);
  struct Refusal {
    std::function<void(GgufBuilder&)> apply;
    std::string needle;
  };
  const std::vector<Refusal> cases = {
      {[](GgufBuilder& b) { b.set_string("general.architecture", "gemma2"); }, "gemma2"},
      {[](GgufBuilder& b) { b.set_u32("llama.rope.dimension_count", 18); }, "llama.rope.dimension_count"},
      {[](GgufBuilder& b) { b.set_u32("llama.rope.dimension_count", 7); }, "llama.rope.dimension_count"},
      {[](GgufBuilder& b) { b.set_u32("llama.vocab_size", 4000); }, "llama.vocab_size"},
      {[](GgufBuilder& b) { b.set_string("llama.rope.scaling.type", "yarn"); }, "llama.rope.scaling.type"},
      {[](GgufBuilder& b) { b.set_f32("llama.rope.scaling.factor", 2.0f); }, "llama.rope.scaling.factor"},
      {[](GgufBuilder& b) {
         b.set_string("llama.rope.scaling.type", "linear");
         b.set_f32("llama.rope.scaling.factor", -1.0f);
       },
       "llama.rope.scaling.factor"},
      {[](GgufBuilder& b) { b.set_f32("llama.rope.scaling.attn_factor", 0.5f); }, "llama.rope.scaling.attn_factor"},
      {[](GgufBuilder& b) { b.set_u32("llama.expert_count", 8); }, "llama.expert_count"},
      {[](GgufBuilder& b) { b.set_u32("llama.attention.sliding_window", 16); }, "llama.attention.sliding_window"},
      {[](GgufBuilder& b) { b.set_f32("llama.attention.layer_norm_epsilon", 1e-5f); }, "llama.attention.layer_norm_epsilon"},
      {[](GgufBuilder& b) { b.set_bool("llama.attention.causal", false); }, "llama.attention.causal"},
      {[](GgufBuilder& b) { b.set_u32("llama.attention.value_length", 8); }, "llama.attention.value_length"},
      {[](GgufBuilder& b) { b.set_f32("llama.logit_scale", 2.0f); }, "llama.logit_scale"},
      {[](GgufBuilder& b) { b.set_f32("llama.attn_logit_softcapping", 30.0f); }, "llama.attn_logit_softcapping"},
      {[](GgufBuilder& b) { b.set_bool("llama.use_parallel_residual", true); }, "llama.use_parallel_residual"},
      {[](GgufBuilder& b) { b.set_f32("llama.attention.scale", 1.0f); }, "llama.attention.scale"},
      {[](GgufBuilder& b) { b.set_u32("llama.some_future_key", 3); }, "llama.some_future_key"},
      {[](GgufBuilder& b) { b.add_tensor_f32("blk.0.attn_output.bias", {64}, std::vector<float>(64, 0.0f)); },
       "blk.0.attn_output.bias"},
      {[](GgufBuilder& b) { b.add_tensor_f32("blk.2.attn_norm.weight", {64}, std::vector<float>(64, 1.0f)); },
       "blk.2.attn_norm.weight"},
      {[](GgufBuilder& b) { b.add_tensor_f32("rope_freqs.weight", {4}, {1, 1, 1, 1}); }, "rope_freqs.weight"},
  };
  for (const Refusal& r : cases) {
    INFO("expect a refusal naming " << r.needle);
    GgufBuilder b = base;
    r.apply(b);
    check_refused(b, r.needle);
  }
  {  // a rope dimension of 41 on a head of 40 (the example)
    TinySpec w;
    w.d_model = 160;
    GgufBuilder b = test::tiny_model(w);
    b.set_u32("llama.rope.dimension_count", 41);
    check_refused(b, "llama.rope.dimension_count");
  }
  {  // family tensors: qwen2 without its biases, qwen3 without its head norms, qwen2 with rope_freqs
    TinySpec q2;
    q2.arch = "qwen2";
    GgufBuilder b = test::tiny_model(q2);
    b.remove_tensor("blk.1.attn_k.bias");
    check_refused(b, "blk.1.attn_k.bias");
    GgufBuilder c = test::tiny_model(q2);
    c.add_tensor_f32("rope_freqs.weight", {8}, std::vector<float>(8, 1.0f));
    check_refused(c, "rope_freqs.weight");
    TinySpec q3;
    q3.arch = "qwen3";
    GgufBuilder d = test::tiny_model(q3);
    d.remove_tensor("blk.0.attn_q_norm.weight");
    check_refused(d, "attn_q_norm");
  }
}

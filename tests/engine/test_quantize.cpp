// specchat-quantize's engine part (engine/quantize.h, engine/gguf_write.h): the per-tensor type
// rules of each preset, round trips of every type within its quantization error, refusals, and
// the bundled pair quantized to Q8_0 decoding speculatively exactly as baseline.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/generator.h"
#include "engine/gguf.h"
#include "engine/gguf_write.h"
#include "engine/model_pair.h"
#include "engine/quantize.h"
#include "cli_runner.h"
#include "gguf_writer.h"
#include "test_paths.h"

using namespace specchat;
using specchat::test::GgufBuilder;
namespace fs = std::filesystem;

namespace {

// A directory for one test's files, removed at the end of the test.
struct ScratchDir {
  fs::path p;
  explicit ScratchDir(const std::string& name)
      : p(fs::temp_directory_path() / ("specchat-quantize-" + std::to_string(getpid()) + "-" + name)) {
    fs::remove_all(p);
    fs::create_directories(p);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
  std::string file(const std::string& n) const { return (p / n).string(); }
};

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE(f.good());
}

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> v(n);
  for (float& x : v) x = nd(g);
  return v;
}

std::vector<float> dequantized(const GgufTensorInfo& t) {
  std::vector<float> v(t.n_elements());
  dequantize_to_f32(t.type, t.data, v.data(), v.size());
  return v;
}

double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double se = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    se += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    s += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(se / s);
}

}  // namespace

TEST_CASE("quantize presets: names, file types and which tensor gets which type", "[unit][quantize]") {
  CHECK(parse_quant_preset("q4_k_m") == QuantPreset::q4_k_m);
  CHECK(parse_quant_preset("Q8_0") == QuantPreset::q8_0);
  CHECK_FALSE(parse_quant_preset("Q3_K").has_value());
  CHECK(quant_preset_file_type(QuantPreset::q4_k_m) == 15);
  CHECK(quant_preset_file_type(QuantPreset::q8_0) == 7);
  const std::vector<uint64_t> m = {256, 512}, v1 = {256};
  const DType f16 = DType::f16;
  // The Q4_K_M mix of the shared cases' 2-layer files: output, blk.1.attn_v, blk.1.ffn_down Q6_K.
  CHECK(quant_tensor_type(QuantPreset::q4_k_m, "output.weight", m, f16, 2) == DType::q6_k);
  CHECK(quant_tensor_type(QuantPreset::q4_k_m, "token_embd.weight", m, f16, 2) == DType::q4_k);
  CHECK(quant_tensor_type(QuantPreset::q4_k_m, "blk.0.attn_v.weight", m, f16, 2) == DType::q4_k);
  CHECK(quant_tensor_type(QuantPreset::q4_k_m, "blk.1.attn_v.weight", m, f16, 2) == DType::q6_k);
  CHECK(quant_tensor_type(QuantPreset::q4_k_m, "blk.1.ffn_down.weight", m, f16, 2) == DType::q6_k);
  CHECK(quant_tensor_type(QuantPreset::q4_k_m, "blk.1.ffn_up.weight", m, f16, 2) == DType::q4_k);
  CHECK(quant_tensor_type(QuantPreset::q4_k_m, "blk.1.attn_norm.weight", v1, DType::f32, 2) == DType::f32);
  // 16 layers: use_more_bits picks 0, 1, 4, 7, 10, 13, 14, 15.
  std::vector<int> more;
  for (int i = 0; i < 16; ++i) {
    if (quant_tensor_type(QuantPreset::q5_k_m, "blk." + std::to_string(i) + ".ffn_down.weight", m, f16, 16) == DType::q6_k) {
      more.push_back(i);
    }
  }
  CHECK(more == std::vector<int>{0, 1, 4, 7, 10, 13, 14, 15});
  CHECK(quant_tensor_type(QuantPreset::q5_k_m, "blk.2.ffn_down.weight", m, f16, 16) == DType::q5_k);
  // Single types apply to every matrix; rows that are not whole blocks fall back.
  CHECK(quant_tensor_type(QuantPreset::q4_0, "output.weight", m, f16, 2) == DType::q4_0);
  CHECK(quant_tensor_type(QuantPreset::q6_k, "output.weight", m, f16, 2) == DType::q6_k);
  CHECK(quant_tensor_type(QuantPreset::q4_k, "blk.0.attn_q.weight", {320, 320}, f16, 2) == DType::q8_0);
  CHECK(quant_tensor_type(QuantPreset::q8_0, "blk.0.attn_q.weight", {40, 8}, f16, 2) == DType::f16);
}

TEST_CASE("quantize: every preset round-trips within its type's quantization error", "[unit][quantize]") {
  ScratchDir dir("roundtrip");
  const std::vector<float> a = gaussian(512 * 6, 1), b = gaussian(96 * 3, 2), norm = gaussian(512, 3);
  GgufBuilder g;
  g.set_string("general.architecture", "llama").set_string("general.name", "round trip");
  g.add_tensor_f32("token_embd.weight", {512, 6}, a)
      .add_tensor_f32("blk.0.attn_norm.weight", {512}, norm)
      .add_tensor_f16("blk.0.ffn_down.weight", {96, 3}, b);
  const std::string in = dir.file("in.gguf");
  write_bytes(in, g.build());
  const GgufFile src = GgufFile::open(in);
  const std::vector<float> b16 = dequantized(src.require_tensor("blk.0.ffn_down.weight"));
  // Relative RMS bounds as in tests/kernels/cpu/test_quant.cpp (measured there with 20% margin).
  const std::map<DType, double> bound = {{DType::q8_0, 0.006}, {DType::q4_0, 0.1}, {DType::q4_k, 0.085},
                                         {DType::q5_k, 0.043}, {DType::q6_k, 0.021}};
  for (QuantPreset p : {QuantPreset::q8_0, QuantPreset::q4_0, QuantPreset::q4_k, QuantPreset::q5_k, QuantPreset::q6_k,
                        QuantPreset::q4_k_m, QuantPreset::q5_k_m}) {
    const std::string out = dir.file(std::string(quant_preset_name(p)) + ".gguf");
    const QuantizeSummary s = quantize_gguf(in, out, p, 2);
    const GgufFile f = GgufFile::open(out);
    INFO(quant_preset_name(p));
    CHECK(f.get_string("general.name") == "round trip");
    CHECK(f.get_u32("general.file_type") == quant_preset_file_type(p));
    CHECK(f.get_u32("general.quantization_version") == 2);
    uint64_t bytes = 0;
    for (const GgufTensorInfo& t : f.tensors()) bytes += t.n_bytes;
    CHECK(bytes == s.out_bytes);
    CHECK(s.out_bytes < s.in_bytes);
    const GgufTensorInfo& e = f.require_tensor("token_embd.weight");
    CHECK(e.type == quant_tensor_type(p, e.name, e.ne, DType::f32, 1));
    CHECK(dtype_is_block(e.type));
    CHECK(rel_rms(dequantized(e), a) <= bound.at(e.type));
    CHECK(rel_rms(dequantized(e), a) > 0);
    // The norm is copied bit for bit; the 96-wide matrix is whole q8_0/q4_0 blocks only.
    const GgufTensorInfo& n = f.require_tensor("blk.0.attn_norm.weight");
    CHECK(n.type == DType::f32);
    CHECK(dequantized(n) == norm);
    const GgufTensorInfo& d = f.require_tensor("blk.0.ffn_down.weight");
    CHECK(d.type == (p == QuantPreset::q4_0 ? DType::q4_0 : DType::q8_0));
    CHECK(rel_rms(dequantized(d), b16) <= bound.at(d.type));
    // The summary names the fallback (k-quant presets: 96 values per row are not 256-blocks).
    if (p == QuantPreset::q8_0 || p == QuantPreset::q4_0) {
      CHECK(s.fallbacks.empty());
    } else {
      REQUIRE(s.fallbacks.size() == 1);
      CHECK(s.fallbacks[0].tensor == "blk.0.ffn_down.weight");
      CHECK(s.fallbacks[0].row_length == 96);
      CHECK(dtype_block_size(s.fallbacks[0].wanted) == 256);
      CHECK(s.fallbacks[0].written == DType::q8_0);
    }
  }
}

TEST_CASE("quantize: bad inputs are refused with a message and leave no output", "[unit][quantize]") {
  ScratchDir dir("refusals");
  GgufBuilder g;
  g.set_string("general.architecture", "llama");
  g.add_tensor_q8_0("blk.0.attn_q.weight", {32, 2}, gaussian(64, 4));
  const std::string q8 = dir.file("q8.gguf"), out = dir.file("out.gguf");
  write_bytes(q8, g.build());
  try {
    quantize_gguf(q8, out, QuantPreset::q4_0);
    FAIL("a q8_0 input was requantized");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("already q8_0") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(out));
  CHECK_THROWS_AS(quantize_gguf(dir.file("missing.gguf"), out, QuantPreset::q8_0), GgufError);
  CHECK_THROWS_AS(quantize_gguf(q8, q8, QuantPreset::q8_0), std::invalid_argument);
  // Non-finite weights.
  std::vector<float> w = gaussian(64, 5);
  w[7] = INFINITY;
  GgufBuilder h;
  h.add_tensor_f32("blk.0.attn_q.weight", {32, 2}, w);
  const std::string bad = dir.file("inf.gguf");
  write_bytes(bad, h.build());
  CHECK_THROWS_AS(quantize_gguf(bad, out, QuantPreset::q8_0), std::invalid_argument);
  CHECK_FALSE(fs::exists(out));
  // An unwritable output.
  GgufBuilder ok;
  ok.add_tensor_f32("blk.0.attn_q.weight", {32, 2}, gaussian(64, 6));
  const std::string good = dir.file("ok.gguf");
  write_bytes(good, ok.build());
  CHECK_THROWS_AS(quantize_gguf(good, dir.file("no/such/dir/out.gguf"), QuantPreset::q8_0), GgufError);
}

TEST_CASE("quantize: an output that exists and is not a regular file is refused and left as it was", "[unit][quantize]") {
  // Regression: the file was written to <output>.tmp and renamed over <output> whatever it was, so
  // `specchat-quantize in.gguf /dev/null Q8_0` run as root replaced /dev/null with a regular
  // file (found with a FIFO and a character device), and exited 0.
  ScratchDir dir("special-outputs");
  GgufBuilder ok;
  ok.add_tensor_f32("blk.0.attn_q.weight", {32, 2}, gaussian(64, 6));
  const std::string good = dir.file("ok.gguf");
  write_bytes(good, ok.build());
  const std::string fifo = dir.file("fifo");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  try {
    quantize_gguf(good, fifo, QuantPreset::q8_0);
    FAIL("a FIFO was replaced by the output");
  } catch (const GgufError& e) {
    CHECK(std::string(e.what()).find("not a regular file") != std::string::npos);
  }
  CHECK(fs::is_fifo(fifo));
  CHECK_FALSE(fs::exists(fifo + ".tmp"));
  const std::string sub = dir.file("a-directory");
  fs::create_directory(sub);
  CHECK_THROWS_AS(quantize_gguf(good, sub, QuantPreset::q8_0), GgufError);
  CHECK(fs::is_directory(sub));
  // A regular file is still replaced (the usual case: writing over an earlier output).
  const std::string prev = dir.file("prev.gguf");
  write_bytes(prev, ok.build());
  quantize_gguf(good, prev, QuantPreset::q8_0);
  CHECK(fs::is_regular_file(prev));
}

TEST_CASE("the bundled pair quantized to Q8_0 and Q4_0: speculative greedy output equals baseline token for token", "[model][quantize][speculative]") {
  // Q8_0 is the quantized pair; Q4_0 also fits the bundled shapes (rows of 128, 320, 384
  // and 864 values are whole 32-blocks; the k-quants would fall back to Q8_0 on them).
  for (QuantPreset p : {QuantPreset::q8_0, QuantPreset::q4_0}) {
    ScratchDir dir(std::string("pair-") + quant_preset_name(p));
    const std::string tq = dir.file("target.gguf"), dq = dir.file("draft.gguf");
    quantize_gguf(test::target_model(), tq, p, 2);
    quantize_gguf(test::draft_model(), dq, p, 2);
    PairOptions o;
    o.target_path = tq;
    o.draft_path = dq;
    ModelPair mp = ModelPair::load(o);
    // Weights held in the file's types: the bytes equal the file's tensor bytes.
    const GgufFile f = GgufFile::open(tq);
    uint64_t file_bytes = 0, n_block = 0;
    for (const GgufTensorInfo& t : f.tensors()) {
      file_bytes += t.n_bytes;
      n_block += t.type == (p == QuantPreset::q8_0 ? DType::q8_0 : DType::q4_0);
    }
    INFO(quant_preset_name(p));
    CHECK(mp.target->weight_bytes() == file_bytes);
    CHECK(n_block == f.tensors().size() - static_cast<size_t>(2 * mp.target->config().n_layer + 1));  // all but norms
    const std::vector<std::string> prompts = {"Once upon a time, there was a little", "The cat sat on the",
                                              "Tom had 3 apples and bought 5 more. How many"};
    int accepted = 0;
    for (const std::string& text : prompts) {
      const std::vector<int32_t> prompt = mp.encode_prompt(text);
      auto run = [&](int k) {
        Generator g(*mp.target, mp.draft.get());
        GenerateRequest r;
        r.prompt = prompt;
        r.max_tokens = 40;
        r.spec.draft_k = k;
        return g.generate(r);
      };
      const GenerationResult base = run(0);
      for (int k : {1, 4}) {
        const GenerationResult spec = run(k);
        INFO("prompt '" << text << "' k " << k);
        REQUIRE(spec.tokens == base.tokens);
        accepted += spec.stats.n_accepted;
      }
    }
    CHECK(accepted > 0);  // the quantized draft still agrees with the quantized target
  }
}

TEST_CASE("specchat-quantize: exit status, messages, and specchat-cli --json reporting the file's bytes", "[model][quantize][cli]") {
  ScratchDir dir("cli");
  const std::string t = dir.file("t.gguf"), d = dir.file("d.gguf");
  test::CliResult r = test::run_process(test::quantize_path(), {test::target_model(), t, "q8_0", "--threads", "2"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("q8_0") != std::string::npos);
  r = test::run_process(test::quantize_path(), {test::draft_model(), d, "Q8_0"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("note:") == std::string::npos);  // every row is whole q8_0 blocks
  // Regression: Q4_K on the bundled target (rows of 320 and 864 values) wrote Q8_0 without a
  // word; now a note says which matrices got which type and why.
  r = test::run_process(test::quantize_path(), {test::draft_model(), dir.file("k.gguf"), "Q4_K"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("with rows of 128 values, not whole 256-value blocks of q4_K, written as q8_0") !=
        std::string::npos);
  // Bad type: status 2, the list of types; a quantized input: status 1, the reason; no output.
  r = test::run_process(test::quantize_path(), {test::draft_model(), dir.file("x.gguf"), "Q3_K"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("Q4_K_M") != std::string::npos);
  r = test::run_process(test::quantize_path(), {d, dir.file("x.gguf"), "Q4_0"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("already q8_0") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("x.gguf")));
  // The quantized pair runs through the CLI, and --json reports the file's tensor bytes.
  r = test::run_cli({"generate", "--json", "-n", "4", "--ctx", "128", "--model", t, "--draft", d, "--prompt", "Once"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  auto tensor_bytes = [](const std::string& path) {
    const GgufFile f = GgufFile::open(path);
    uint64_t b = 0;
    for (const GgufTensorInfo& ti : f.tensors()) b += ti.n_bytes;
    return static_cast<double>(b);
  };
  CHECK(r.json.at("memory").at("weights_bytes").get<double>() == tensor_bytes(t));
  CHECK(r.json.at("memory").at("draft").at("weights_bytes").get<double>() == tensor_bytes(d));
  CHECK(r.json.at("tokens").size() == 4);
}

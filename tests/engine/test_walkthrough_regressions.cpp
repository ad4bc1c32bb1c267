// Regressions found by the first new-user walkthrough: NaN options, NaN weights (also in a
// quantized model on the integer path), bench budget range, calibrate with a non-model draft.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "cli_runner.h"
#include "engine/gguf.h"
#include "engine/quantize.h"
#include "gguf_writer.h"
#include "model_fixture.h"

using namespace specchat;
namespace fs = std::filesystem;

TEST_CASE("walkthrough: --temp nan and --top-p nan are refused as usage errors", "[model][cli]") {
  for (const char* opt : {"--temp", "--top-p"}) {
    const auto r = test::run_cli({"generate", "--prompt", "Once upon a time", "-n", "4", opt, "nan", "--json"});
    INFO(opt << ": " << r.describe());
    CHECK(r.exit_code == 2);
  }
}

TEST_CASE("walkthrough: a model whose logits are not finite gives a typed error", "[model][cli]") {
  const fs::path dir = fs::temp_directory_path() / ("specchat-nan-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "nan.gguf").string();
  {
    test::GgufBuilder b = test::GgufBuilder::from_file(GgufFile::open(test::target_model()));
    auto& t = b.tensor("output_norm.weight");  // f32: NaN everywhere makes every logit NaN
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = 0; i + 4 <= t.data.size(); i += 4) std::memcpy(t.data.data() + i, &nan, 4);
    b.write_file(path);
  }
  const auto r = test::run_cli({"generate", "--model", path, "--draft", "none", "--prompt", "hi", "-n", "4", "--json"});
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  REQUIRE(r.json_ok);
  CHECK(r.json.at("error").at("kind") == "non_finite_logits");
  fs::remove_all(dir);
}

TEST_CASE("walkthrough: a NaN weight in a Q8_0 model still gives the typed error with q8 activations", "[model][cli]") {
  // Regression: the integer path's activation rounding turned a NaN activation into -127 · d, so
  // a damaged quantized model (one NaN in an f32 norm) printed fluent text with exit 0, while
  // --activations f32 reported non_finite_logits. Both must report it.
  const fs::path dir = fs::temp_directory_path() / ("specchat-nanq-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string q8 = (dir / "q8.gguf").string(), path = (dir / "nan-q8.gguf").string();
  quantize_gguf(test::target_model(), q8, QuantPreset::q8_0);
  {
    test::GgufBuilder b = test::GgufBuilder::from_file(GgufFile::open(q8));
    auto& t = b.tensor("blk.3.ffn_norm.weight");  // f32; one element
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(t.data.data() + 4 * 7, &nan, 4);
    b.write_file(path);
  }
  for (const char* act : {"q8", "f32"}) {
    const auto r = test::run_cli({"generate", "--model", path, "--draft", "none", "--prompt", "Once upon a time", "-n",
                                  "4", "--activations", act, "--json"});
    INFO(act << ": " << r.describe());
    CHECK(r.exit_code == 1);
    REQUIRE(r.json_ok);
    CHECK(r.json.at("error").at("kind") == "non_finite_logits");
  }
  fs::remove_all(dir);
}

TEST_CASE("walkthrough: a NaN in one attn_norm weight gives the typed error", "[model][cli]") {
  // Regression: the attention softmax turned a NaN score into a zero weight, so a NaN in an
  // attention norm produced finite output and fluent text (exit 0).
  const fs::path dir = fs::temp_directory_path() / ("specchat-nana-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "nan-attn.gguf").string();
  {
    test::GgufBuilder b = test::GgufBuilder::from_file(GgufFile::open(test::target_model()));
    auto& t = b.tensor("blk.3.attn_norm.weight");
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(t.data.data() + 4 * 11, &nan, 4);
    b.write_file(path);
  }
  const auto r = test::run_cli({"generate", "--model", path, "--draft", "none", "--prompt", "Once upon a time", "-n",
                                "4", "--json"});
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  REQUIRE(r.json_ok);
  CHECK(r.json.at("error").at("kind") == "non_finite_logits");
  fs::remove_all(dir);
}

TEST_CASE("walkthrough: bench refuses node budgets outside 1..127", "[model][cli]") {
  const auto r = test::run_cli({"bench", "--max-prompts", "1", "-n", "2", "--budgets", "500"});
  INFO(r.describe());
  CHECK(r.exit_code == 2);
  const auto r0 = test::run_cli({"bench", "--max-prompts", "1", "-n", "2", "--chain-k", "0"});
  CHECK(r0.exit_code == 2);
}

TEST_CASE("walkthrough: calibrate explains that it needs a draft model", "[model][cli]") {
  const auto r = test::run_cli({"calibrate", "--draft", "ngram", "--out", "/tmp/specchat-never-written.json"});
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("needs a draft model") != std::string::npos);
}

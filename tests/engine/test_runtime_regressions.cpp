// Regressions found by the new-user check of the engine-runtime work: a damaged draft under
// sampling, bench reports to unwritable paths, contexts past the model's training length.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <limits>
#include <unistd.h>

#include "cli_runner.h"
#include "engine/generator.h"
#include "engine/gguf.h"
#include "engine/op_profile.h"
#include "gguf_writer.h"
#include "model_fixture.h"

using namespace specchat;
namespace fs = std::filesystem;

TEST_CASE("runtime regressions: a draft with NaN weights is refused, not accepted blindly, when sampling",
          "[model][cli]") {
  // Before: min(1, p / NaN) accepted every drafted token, so sampled output followed the broken
  // draft ("careful careful careful ...") with no error.
  const fs::path dir = fs::temp_directory_path() / ("specchat-nandraft-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "draft-nan.gguf").string();
  {
    test::GgufBuilder b = test::GgufBuilder::from_file(GgufFile::open(test::draft_model()));
    auto& t = b.tensor("output_norm.weight");  // f32: NaN everywhere makes every draft logit NaN
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = 0; i + 4 <= t.data.size(); i += 4) std::memcpy(t.data.data() + i, &nan, 4);
    b.write_file(path);
  }
  for (const char* temp : {"0.8", "0"}) {
    const auto r = test::run_cli({"generate", "--draft", path, "--chat", "Tell me a story about Lily.", "-n", "24",
                                  "--temp", temp, "--seed", "1", "--json"});
    INFO("temp " << temp << ": " << r.describe());
    CHECK(r.exit_code == 1);
    REQUIRE(r.json_ok);
    CHECK(r.json.at("error").at("kind") == "non_finite_draft_logits");
  }
  fs::remove_all(dir);
}

TEST_CASE("runtime regressions: bench reports to an unwritable path fail with a message", "[model][cli]") {
  const std::string bad = "/nonexistent-specchat-dir/report.json";
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--max-prompts", "1", "-n", "2", "--chain-k", "2", "--budgets", "4"},
        std::vector<std::string>{"--concurrency", "2", "--max-prompts", "2", "-n", "2", "--chain-k", "2"},
        std::vector<std::string>{"--verify-cost", "--max-prompts", "3"}}) {
    std::vector<std::string> args = {"bench", "--out", bad};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::run_cli(args);
    INFO(r.describe());
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("cannot write") != std::string::npos);
  }
}

TEST_CASE("runtime regressions: a context past the model's training length is run with a warning", "[model][cli]") {
  // Twice the bundled target's training context (1,024).
  const auto r = test::run_cli({"generate", "--prompt", "Once upon a time", "-n", "4", "--ctx", "2048", "--json"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  bool warned = false;
  for (const auto& w : r.json.at("warnings")) warned = warned || w.get<std::string>().find("training context") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("runtime regressions: warm_up of a -n 0 request still runs the target", "[model]") {
  // Regression: warm_up did nothing for max_tokens 0, so `compare -n 0` ran its baseline cold
  // and its speculative side warm (total_time_ratio 2.7-17x for identical work, --draft none).
  ModelPair& pair = test::bundled_pair();
  Generator g(*pair.target, pair.draft.get());
  OpProfile prof;
  REQUIRE(pair.target->set_profile(&prof));
  GenerateRequest req;
  req.prompt = pair.encode_prompt("Once upon a time");
  req.max_tokens = 0;
  g.warm_up(req);
  pair.target->set_profile(nullptr);
  CHECK(prof.forwards >= 1);
}

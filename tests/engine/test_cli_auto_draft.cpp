// A user's own target alone just works (issue 11 item 6): `specchat-cli generate --model X`
// without --draft picks the smallest compatible .gguf beside X as the draft (skipping smaller
// files that cannot serve it), or falls back to the n-gram drafter, and says which on stderr
// and in the --json "draft_choice" field. Models are generated (tiny_model.h) in a temp folder.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "cli_runner.h"
#include "tiny_model.h"

using namespace specchat;
using test::GgufBuilder;
using test::TinySpec;

namespace {

namespace fs = std::filesystem;

struct Folder {
  fs::path dir;
  explicit Folder(const std::string& name)
      : dir(fs::temp_directory_path() / ("specchat-auto-draft-" + std::to_string(getpid()) + "-" + name)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string put(const GgufBuilder& b, const std::string& name) const {
    const std::string p = (dir / name).string();
    b.write_file(p);
    return p;
  }
};

TinySpec spec(int d_model, int n_layer, int n_head, int n_head_kv, uint64_t seed) {
  TinySpec s;
  s.d_model = d_model;
  s.n_layer = n_layer;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  s.seed = seed;
  s.n_ctx = 128;
  return s;
}

const std::vector<std::string> kGen = {"generate", "--json", "-n", "12", "--draft-k", "3", "--prompt", "Once upon a time"};

std::vector<std::string> args_with(std::vector<std::string> extra) {
  std::vector<std::string> a = kGen;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace

TEST_CASE("cli: --model alone picks the smallest compatible draft beside it", "[unit][cli][auto_draft]") {
  Folder f("pick");
  const std::string target = f.put(test::tiny_model(spec(64, 2, 4, 2, 1)), "target.gguf");
  const std::string small = f.put(test::tiny_model(spec(32, 1, 2, 1, 2)), "small-draft.gguf");
  f.put(test::tiny_model(spec(48, 1, 4, 2, 3)), "medium-draft.gguf");
  // Smaller still, but unusable: another vocabulary (one piece changed), and a file that is
  // not a model at all. Both are skipped.
  GgufBuilder other = test::tiny_model(spec(16, 1, 2, 1, 4));
  {
    const GgufFile g = GgufFile::from_bytes(other.build());
    auto tokens = g.get_string_array("tokenizer.ggml.tokens");
    tokens[500] = "\xE2\x96\x81otherpiece";
    other.set_string_array("tokenizer.ggml.tokens", tokens);
  }
  f.put(other, "other-vocab.gguf");
  {
    GgufBuilder junk;
    junk.set_string("general.architecture", "llama");
    f.put(junk, "junk.gguf");
  }
  const test::CliResult r = test::run_cli(args_with({"--model", target}));
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  const auto& c = r.json.at("draft_choice");
  CHECK(c.at("drafter") == "model");
  CHECK(c.at("automatic") == true);
  CHECK(fs::equivalent(c.at("path").get<std::string>(), small));
  CHECK(r.err.find("draft: " + small) != std::string::npos);
  CHECK(r.json.at("drafter") == "model");
  CHECK(r.json.at("n_drafted").get<int>() > 0);
}

TEST_CASE("cli: --model alone with no usable draft beside it falls back to the n-gram drafter", "[unit][cli][auto_draft]") {
  Folder f("ngram");
  const std::string target = f.put(test::tiny_model(spec(64, 2, 4, 2, 1)), "target.gguf");
  f.put(test::tiny_model(spec(96, 2, 4, 2, 5)), "bigger.gguf");  // larger than the target: never a draft
  const test::CliResult r = test::run_cli(args_with({"--model", target}));
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  const auto& c = r.json.at("draft_choice");
  CHECK(c.at("drafter") == "ngram");
  CHECK(c.at("automatic") == true);
  CHECK(c.at("path").is_null());
  CHECK(r.json.at("drafter") == "ngram");
  CHECK(r.err.find("draft: n-gram drafter") != std::string::npos);
}

TEST_CASE("cli: an explicit --draft is used as given, with no automatic choice", "[unit][cli][auto_draft]") {
  Folder f("given");
  const std::string target = f.put(test::tiny_model(spec(64, 2, 4, 2, 1)), "target.gguf");
  f.put(test::tiny_model(spec(16, 1, 2, 1, 6)), "tiny.gguf");
  const std::string mine = f.put(test::tiny_model(spec(32, 1, 2, 1, 2)), "mine.gguf");
  const test::CliResult r = test::run_cli(args_with({"--model", target, "--draft", mine}));
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  CHECK(r.json.at("draft_choice").at("automatic") == false);
  CHECK(fs::equivalent(r.json.at("draft_choice").at("path").get<std::string>(), mine));
  CHECK(r.err.find("draft:") == std::string::npos);
}

TEST_CASE("cli: with neither --model nor --draft the bundled pair runs, and the JSON says the draft was chosen for it", "[model][cli][auto_draft]") {
  // Regression (fresh-clone check): draft_choice said "given" although the user gave no draft.
  const test::CliResult r = test::run_cli(args_with({}));
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  const auto& c = r.json.at("draft_choice");
  CHECK(c.at("drafter") == "model");
  CHECK(c.at("automatic") == true);
  CHECK(c.at("reason").get<std::string>().find("bundled") != std::string::npos);
  CHECK(fs::path(c.at("path").get<std::string>()).filename() == "specchat-draft.gguf");
}

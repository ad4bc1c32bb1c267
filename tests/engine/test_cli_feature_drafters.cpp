// The CLI's drafters that read the target's hidden states (--drafter block|mtp, --block-drafter,
// --mtp; app/cli/feature_drafters.cpp): a named file is loaded and bound to the target, a missing
// or foreign file fails with a clear message (exit 1) instead of running something else, and
// greedy output with the drafter equals plain decoding. The other drafters are unaffected.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <tuple>

#include "cli_runner.h"
#include "model_fixture.h"

using namespace specchat;
namespace fs = std::filesystem;

namespace {
std::string data(const std::string& rel) { return std::string(SPECCHAT_SOURCE_DIR) + "/tests/data/" + rel; }

using RefusedCases = std::vector<std::pair<std::vector<std::string>, std::string>>;

// `generate --prompt Hi -n 2` plus each case's options must exit 2 with its message on stderr.
void check_generate_refuses(const RefusedCases& cases) {
  for (const auto& [extra, message] : cases) {
    std::vector<std::string> args = {"generate", "--prompt", "Hi", "-n", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_cli(args);
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
}
}  // namespace

TEST_CASE("cli: --drafter mtp / block with the reference drafters give the baseline's greedy tokens", "[model][cli][features]") {
  const std::vector<std::string> base = {"generate", "--json", "-n", "24", "--chat", "Tell me a story about Tom."};
  std::vector<std::string> plain_args = base;
  plain_args.insert(plain_args.end(), {"--drafter", "none"});
  const test::CliResult plain = test::run_cli(plain_args);
  INFO(plain.describe());
  REQUIRE(plain.json_ok);
  for (const auto& [drafter, flag, file] :
       {std::tuple<std::string, std::string, std::string>{"mtp", "--mtp", "drafters/mtp-ref.gguf"},
        {"block", "--block-drafter", "drafters/dflash-ref.gguf"}})
  for (const char* tree : {"chain", "dynamic"}) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--drafter", drafter, flag, data(file), "--tree", tree});
    const test::CliResult r = test::run_cli(args);
    INFO(r.describe());
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.json_ok);
    CHECK(r.json["drafter"] == drafter);
    CHECK(r.json["tokens"] == plain.json["tokens"]);
    CHECK(r.json["n_drafted"].get<int>() > 0);
  }
}

TEST_CASE("cli: feature drafter files that cannot serve the target fail clearly", "[model][cli][features]") {
  // A missing file names itself.
  const test::CliResult missing =
      test::run_cli({"generate", "-n", "2", "--prompt", "Once", "--drafter", "mtp", "--mtp", "no-such-head.gguf"});
  INFO(missing.describe());
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("no-such-head.gguf") != std::string::npos);
  // A head of another architecture's file: the DFlash reference is not an MTP head.
  const test::CliResult wrong = test::run_cli(
      {"generate", "-n", "2", "--prompt", "Once", "--drafter", "mtp", "--mtp", data("drafters/dflash-ref.gguf")});
  INFO(wrong.describe());
  CHECK(wrong.exit_code == 1);
  CHECK(wrong.err.find("dflash") != std::string::npos);
  const test::CliResult wrong_block = test::run_cli({"generate", "-n", "2", "--prompt", "Once", "--drafter", "block",
                                                     "--block-drafter", data("drafters/mtp-ref.gguf")});
  INFO(wrong_block.describe());
  CHECK(wrong_block.exit_code == 1);
  CHECK(wrong_block.err.find("specchat-mtp") != std::string::npos);
  // A target with no head beside it and none named: says what to pass.
  const fs::path dir = fs::temp_directory_path() / ("specchat-cli-features-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(bundled_target_path(), dir / "target.gguf");
  const test::CliResult none = test::run_cli(
      {"generate", "-n", "2", "--prompt", "Once", "--model", (dir / "target.gguf").string(), "--drafter", "mtp"});
  fs::remove_all(dir);
  INFO(none.describe());
  CHECK(none.exit_code == 1);
  CHECK(none.err.find("--mtp FILE") != std::string::npos);
  // An unknown drafter is still a command-line error (exit 2).
  const test::CliResult bad = test::run_cli({"generate", "-n", "2", "--prompt", "x", "--drafter", "medusa"});
  INFO(bad.describe());
  CHECK(bad.exit_code == 2);
  // No drafting asked for: --drafter block with --draft-k 0 runs plain decoding.
  const test::CliResult plain =
      test::run_cli({"generate", "--json", "-n", "3", "--prompt", "Once upon a time", "--drafter", "block", "-k", "0"});
  INFO(plain.describe());
  CHECK(plain.exit_code == 0);
  REQUIRE(plain.json_ok);
  CHECK(plain.json["n_generated"] == 3);
  CHECK(plain.json["drafter"] == "none");
}

TEST_CASE("cli: --draft none or ngram with another --drafter is refused not ignored", "[model][cli][features]") {
  // Regression: `--draft none --drafter mtp` decoded plainly and `--draft ngram --drafter mtp`
  // ran the n-gram drafter, both without a word: --draft none / ngram name a drafter too.
  for (const char* cmd : {"generate", "compare", "chat"}) {
    for (const auto& [draft, drafter] : {std::pair<const char*, const char*>{"none", "mtp"}, {"ngram", "mtp"},
                                         {"none", "ngram"}, {"ngram", "model"}}) {
      std::vector<std::string> args = {cmd, "--draft", draft, "--drafter", drafter, "-n", "2"};
      if (std::string(cmd) != "chat") args.insert(args.end(), {"--prompt", "Hi"});
      const test::CliResult r = test::run_cli(args, 180, "/dev/null");
      INFO(r.describe());
      CHECK(r.exit_code == 2);
      CHECK(r.err.find("--drafter " + std::string(drafter)) != std::string::npos);
    }
  }
  // Agreeing names run.
  const test::CliResult ok = test::run_cli({"generate", "--draft", "ngram", "--drafter", "ngram", "-n", "2", "--prompt", "Hi"});
  INFO(ok.describe());
  CHECK(ok.exit_code == 0);
}

TEST_CASE("cli: a draft model with another --drafter and remote options without --endpoint are refused", "[model][cli][features]") {
  // Regression (a break-it pass): each was accepted and ignored.
  const RefusedCases cases = {
      {{"--draft", test::draft_model(), "--drafter", "ngram"}, "only --drafter model uses"},
      {{"--draft", "bundled", "--drafter", "block"}, "only --drafter model uses"},
      {{"--api-key", "k"}, "--api-key needs --endpoint"},
      {{"--remote-model", "m"}, "--remote-model needs --endpoint"},
      {{"--system", "Be brief."}, "--system applies to --chat"}};
  check_generate_refuses(cases);
  const test::CliResult ok = test::run_cli({"generate", "--draft", "bundled", "--drafter", "model", "--prompt", "Hi", "-n", "2"});
  INFO(ok.describe());
  CHECK(ok.exit_code == 0);
}

TEST_CASE("cli: chat refuses the one-shot prompt options and --json", "[model][cli]") {
  // Regression (a break-it pass): chat --prompt, --chat, --messages and --json were ignored.
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--prompt", "Hi"}, {"--chat", "Hi"},
                                                {"--messages", "/nonexistent.json"}, {"--json"}}) {
    std::vector<std::string> args = {"chat", "-n", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_cli(args, 180, "/dev/null");
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(extra[0] + " does not apply to chat") != std::string::npos);
  }
}

TEST_CASE("cli: text-mode generate says when the reply stopped at the end of the context", "[model][cli]") {
  // Regression (a break-it pass): only --json said finish_reason context_full.
  const test::CliResult full = test::run_cli({"generate", "--ctx", "40", "-n", "200", "--prompt", "Once upon a time"});
  INFO(full.describe());
  REQUIRE(full.exit_code == 0);
  CHECK(full.err.find("stopped at the end of the context (40 tokens") != std::string::npos);
  const test::CliResult room = test::run_cli({"generate", "-n", "4", "--prompt", "Once upon a time"});
  INFO(room.describe());
  REQUIRE(room.exit_code == 0);
  CHECK(room.err.find("end of the context") == std::string::npos);
}

TEST_CASE("cli: drafting options with plain decoding and a drafter's file with another drafter are refused", "[model][cli][features]") {
  // Regression (2026-12-04): each of these was accepted and ignored (`--drafter none -k 4`
  // decoded plainly; `--block-drafter F` alone ran the draft model; `--chat-template` with a raw
  // --prompt rendered nothing).
  const std::string dflash = data("drafters/dflash-ref.gguf"), mtp = data("drafters/mtp-ref.gguf");
  const RefusedCases cases = {
      {{"--drafter", "none", "--draft-k", "4"}, "--draft-k does not apply to plain decoding"},
      {{"--draft", "none", "--tree", "dynamic"}, "--tree does not apply to plain decoding"},
      {{"--drafter", "none", "--node-budget", "8"}, "--node-budget does not apply to plain decoding"},
      {{"--drafter", "none", "--no-draft-backoff"}, "--no-draft-backoff does not apply to plain decoding"},
      {{"--drafter", "none", "--draft-backend", "cpu"}, "--draft-backend does not apply to plain decoding"},
      {{"--block-drafter", dflash}, "--block-drafter is read by --drafter block only"},
      {{"--drafter", "ngram", "--mtp", mtp}, "--mtp is read by --drafter mtp only"},
      {{"--chat-template", "chatml"}, "--chat-template applies to --chat"},
      // A second break-it pass (2026-12-04): more options a mode ignored.
      {{"--draft", "ngram", "--mtp", mtp}, "(the drafter is ngram)"},
      {{"--tree", "chain", "--node-budget", "8"}, "--node-budget does not apply to --tree chain"},
      {{"--tree", "chain", "--branch", "2"}, "--branch does not apply to --tree chain"},
      {{"--tree", "dynamic", "-k", "7"}, "--draft-k sets a chain's length"},
      {{"--tree", "auto", "-k", "9"}, "--draft-k sets a chain's length"},
      // A break-it pass (2026-12-05): auto ignored the budget and depth it was given.
      {{"--tree", "auto", "--node-budget", "4"}, "--node-budget does not apply to --tree auto"},
      {{"--tree", "auto", "--depth", "2"}, "--depth does not apply to --tree auto"},
      {{"--tree", "auto", "--branch", "2"}, "--branch does not apply to --tree auto"},
      {{"--tree", "optimal", "--branch", "7"}, "--branch does not apply to --tree optimal"},
      {{"--drafter", "ngram", "--no-draft-backoff"}, "--no-draft-backoff does not apply to --drafter ngram"},
      {{"--drafter", "ngram", "--draft-backend", "cpu"}, "--draft-backend places the draft model"}};
  check_generate_refuses(cases);
  {  // --messages excludes --prompt, so not through check_generate_refuses
    const test::CliResult r =
        test::run_cli({"generate", "-n", "2", "--messages", "/nonexistent/messages.json", "--system", "Be brief."});
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--system applies to --chat") != std::string::npos);
  }
  // Consistent combinations still run: plain decoding with -k 0, each drafter with its own file,
  // a chat template with --chat.
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--drafter", "none", "-k", "0", "--prompt", "Hi"},
        {"--drafter", "block", "--block-drafter", dflash, "--prompt", "Hi"},
        {"--drafter", "mtp", "--mtp", mtp, "--prompt", "Hi"},
        {"--chat-template", "chatml", "--chat", "Hi"}}) {
    std::vector<std::string> args = {"generate", "-n", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_cli(args);
    INFO(r.describe());
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("cli: the text stats line names the drafter and the draft shape asked for", "[model][cli]") {
  // Regression (2026-12-04): it said "(k = 4, …)" for trees, for the n-gram drafter and when
  // nothing was drafted, whatever drafted.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--drafter", "none"}, "(plain decoding, "},
      {{"--drafter", "model", "-k", "3"}, "(model drafter, chain k = 3, "},
      {{"--drafter", "ngram", "--tree", "dynamic", "--node-budget", "12", "--depth", "4", "--branch", "2"},
       "(ngram drafter, dynamic tree of 12 nodes, depth 4, branch 2, "}};
  for (const auto& [extra, want] : cases) {
    std::vector<std::string> args = {"generate", "--prompt", "Once upon a time", "-n", "4"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_cli(args);
    INFO(r.describe());
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find(want) != std::string::npos);
  }
}

TEST_CASE("cli: chat refuses the PIPO options without --pipo as generate does", "[model][cli]") {
  // Regression (a break-it pass, 2026-12-04): chat accepted and ignored them.
  for (const char* f : {"--pipo-threshold", "--pipo-fidelity"}) {
    const test::CliResult r = test::run_cli({"chat", "-n", "2", f, "1"}, 180, "/dev/null");
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("need --pipo") != std::string::npos);
  }
}

// Command lines that were accepted and then ignored, or failed late (a break-it pass): each is
// now refused up front (exit 2) or fails before any work, with a message that names the cause.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/cli_runner.h"
#include "engine/model_fixture.h"

using namespace specchat;

TEST_CASE("cli: an unknown subcommand is named with the subcommands there are", "[cli]") {
  // Regression: `specchat-cli bogus` said "A subcommand is required".
  const test::CliResult r = test::run_cli({"bogus", "--prompt", "Hi"});
  INFO(r.describe());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("unknown subcommand 'bogus'") != std::string::npos);
  CHECK(r.err.find("generate") != std::string::npos);
  // No subcommand at all still says one is required.
  const test::CliResult none = test::run_cli({});
  INFO(none.describe());
  CHECK(none.exit_code == 2);
}

TEST_CASE("cli: -k 0 (plain decoding) with options that shape a draft is refused", "[model][cli]") {
  // Regression: `-k 0 --tree dynamic` and the like decoded plainly without a word.
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"-k", "0", "--tree", "dynamic"}, {"-k", "0", "--node-budget", "8"},
        {"-k", "0", "--depth", "3"}, {"-k", "0", "--no-draft-backoff"}, {"-k", "0", "--draft-backend", "cpu"},
        {"-k", "0", "--drafter", "mtp", "--mtp", "head.gguf"}}) {
    std::vector<std::string> args = {"generate", "--prompt", "Hi", "-n", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_cli(args);
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--draft-k 0") != std::string::npos);
  }
  // -k 0 alone, or with the drafter named, is plain decoding as before.
  const test::CliResult ok = test::run_cli({"generate", "--prompt", "Hi", "-n", "2", "-k", "0", "--drafter", "block"});
  INFO(ok.describe());
  CHECK(ok.exit_code == 0);
}

TEST_CASE("bench: --out is checked before measuring and --verify-cost refuses --prompts", "[model][cli][bench]") {
  REQUIRE(test::bundled_models_present());
  // Regression: an unwritable --out failed only after the whole run (its table already printed).
  const std::string missing = (std::filesystem::temp_directory_path() / "specchat-no-such-folder" / "r.json").string();
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{"--profile"}, {"--verify-cost", "--max-prompts", "1"}, {"--max-prompts", "1"}}) {
    std::vector<std::string> args = {"bench", "-n", "2", "--out", missing};
    args.insert(args.end(), mode.begin(), mode.end());
    const test::CliResult r = test::run_cli(args);
    INFO(r.describe());
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("cannot write the report to " + missing) != std::string::npos);
    CHECK(r.out.empty());  // nothing measured, nothing printed
  }
  // Regression: --verify-cost times a fixed prefix and ignored --prompts FILE.
  const test::CliResult r = test::run_cli({"bench", "--verify-cost", "--prompts", "p.json"});
  INFO(r.describe());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--prompts does not apply to --verify-cost") != std::string::npos);
}

TEST_CASE("bench --draft none leaves out the draft-model rows instead of labelling plain decoding a chain",
          "[model][cli][bench]") {
  REQUIRE(test::bundled_models_present());
  const test::CliResult r = test::run_cli({"bench", "--draft", "none", "--max-prompts", "1", "-n", "4", "--chain-k", "1"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("baseline") != std::string::npos);
  CHECK(r.out.find("ngram") != std::string::npos);
  for (const char* row : {"\nchain N=", "\ndynamic N=", "\noptimal N=", "repeat chain"}) {
    CHECK(r.out.find(row) == std::string::npos);
  }
  CHECK(r.err.find("no draft model") != std::string::npos);
  // --budgets sizes only those rows: refused rather than ignored.
  const test::CliResult b = test::run_cli({"bench", "--draft", "ngram", "--budgets", "4"});
  INFO(b.describe());
  CHECK(b.exit_code == 2);
  CHECK(b.err.find("--budgets sizes the draft model's trees") != std::string::npos);
}

TEST_CASE("serve: --drafter with --draft none or ngram naming another drafter is refused", "[model][cli][serve]") {
  // Regression: `serve --drafter model --draft none` started with plain decoding without a word.
  const test::CliResult r = test::run_cli({"serve", "--port", "0", "--drafter", "model", "--draft", "none"}, 60);
  INFO(r.describe());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--drafter model") != std::string::npos);
}

TEST_CASE("compare -n 0 reports no speedup it could not measure", "[model][cli]") {
  // Regression: with nothing generated, speedup_decode printed as 0.00x (a measured slowdown to
  // nothing); it is null in JSON and n/a in text, as compare --pipo already did.
  const test::CliResult j = test::run_cli({"compare", "--prompt", "Hi", "-n", "0", "--json"});
  INFO(j.describe());
  REQUIRE(j.exit_code == 0);
  REQUIRE(j.json_ok);
  CHECK(j.json["speedup_decode"].is_null());
  const test::CliResult t = test::run_cli({"compare", "--prompt", "Hi", "-n", "0"});
  INFO(t.describe());
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("speedup_decode n/a") != std::string::npos);
  CHECK(t.out.find("0.00x") == std::string::npos);
}

TEST_CASE("bench: an empty --out is refused", "[model][cli][bench]") {
  // Regression: `--out ""` ran and wrote nothing.
  const test::CliResult empty = test::run_cli({"bench", "--max-prompts", "1", "-n", "2", "--out", ""});
  INFO(empty.describe());
  CHECK(empty.exit_code == 2);
  CHECK(empty.err.find("--out needs a file name") != std::string::npos);
}

TEST_CASE("bench: a report whose bytes do not reach the file fails", "[model][cli][bench]") {
  // Regression: `--out /dev/full` (a full disk) lost the report and exited 0.
  if (!std::filesystem::exists("/dev/full")) {
    WARN("SKIPPED: /dev/full is absent on this machine");
    return;
  }
  const test::CliResult full =
      test::run_cli({"bench", "--verify-cost", "--max-prompts", "1", "--out", "/dev/full"});
  INFO(full.describe());
  CHECK(full.exit_code == 1);
  CHECK(full.err.find("cannot write the report to /dev/full") != std::string::npos);
}

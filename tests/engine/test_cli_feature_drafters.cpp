// The CLI's flags for drafters that read the target's hidden states (--drafter block|mtp,
// --block-drafter, --mtp): accepted by the command line, and until the concrete drafters are
// wired into app/cli/feature_drafters.cpp a request for them fails with a clear message
// (exit 1) instead of running something else. The other drafters are unaffected.
#include <catch2/catch.hpp>

#include "cli_runner.h"
#include "model_fixture.h"

using namespace specchat;

TEST_CASE("cli: --drafter block / mtp are parsed and refused clearly while not built", "[model][cli][features]") {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--drafter", "block"}, std::vector<std::string>{"--drafter", "mtp"},
        std::vector<std::string>{"--block-drafter", "x.gguf"}, std::vector<std::string>{"--mtp", "x.gguf"}}) {
    std::vector<std::string> args = {"generate", "-n", "2", "--prompt", "Once upon a time"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_cli(args);
    INFO(r.describe());
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("not built") != std::string::npos);
    CHECK(r.err.find(extra[0]) != std::string::npos);
  }
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

// `specchat-cli chat` on the terminal: turns accumulate in the context (the second turn's
// prompt holds the first exchange and reuses its KV rows), `/reset` says so and starts a new
// chat, `/exit` ends with status 0.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "cli_runner.h"
#include "model_fixture.h"

using namespace specchat;
namespace fs = std::filesystem;

namespace {
// (prompt tokens, cached prompt tokens) of every turn, from the "[... · C of N prompt tokens cached]" lines.
std::vector<std::pair<int, int>> turns(const std::string& err) {
  std::vector<std::pair<int, int>> out;
  const std::regex re(R"((\d+) of (\d+) prompt tokens cached)");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), re); it != std::sregex_iterator(); ++it) {
    out.push_back({std::stoi((*it)[2]), std::stoi((*it)[1])});
  }
  return out;
}
}  // namespace

TEST_CASE("cli chat: turns build on each other, /reset acknowledges and starts over", "[model][cli]") {
  const fs::path input = fs::temp_directory_path() / ("specchat-chat-input-" + std::to_string(::getpid()));
  std::ofstream(input) << "Tell me a story about Tom.\nAnd then?\n/reset\nAnd then?\n/exit\n";
  const test::CliResult r = test::run_cli({"chat", "-n", "12", "--drafter", "none"}, 180, input.string());
  fs::remove(input);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("(conversation reset") != std::string::npos);
  const auto t = turns(r.err);
  REQUIRE(t.size() == 3);
  // Turn 2 carries turn 1 and its reply, and reuses their KV rows.
  CHECK(t[1].first > t[0].first + 10);
  CHECK(t[1].second >= t[0].first);
  // After /reset the same message is a first turn again: a short prompt.
  CHECK(t[2].first < t[1].first);
  CHECK(t[2].first <= t[0].first);
}

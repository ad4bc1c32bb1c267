// `promtool check metrics` (Debian's prometheus package) over an exposition text, for the server
// tests. promtool exits 1 when the text does not parse and 3 when it parses with lint problems;
// the server's `specchat:` namespace (like vLLM's `vllm:`) always draws the lint "metric names
// should not contain ':'", so that one is allowed and every other problem fails the check.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/cli_runner.h"

namespace specchat::test {

inline const char* promtool_path() { return "/usr/bin/promtool"; }

// "" when promtool accepts `exposition` (parsed; no lint problem but the namespace colon);
// otherwise what it said. Call only when promtool_path() exists.
inline std::string promtool_problems(const std::string& exposition) {
  const auto file =
      std::filesystem::temp_directory_path() / ("specchat-promtool-" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream out(file);
    out << exposition;
  }
  const CliResult r = run_process(promtool_path(), {"check", "metrics"}, 60, file.string());
  std::filesystem::remove(file);
  if (r.exit_code != 0 && r.exit_code != 3) return "promtool exit " + std::to_string(r.exit_code) + ": " + r.err;
  std::istringstream in(r.err + r.out);
  std::string line, problems;
  const std::string colon = "metric names should not contain ':'";
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.size() >= colon.size() && line.compare(line.size() - colon.size(), colon.size(), colon) == 0) continue;
    problems += line + "\n";
  }
  return problems;
}

}  // namespace specchat::test

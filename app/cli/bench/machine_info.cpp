#include "app/cli/bench/machine_info.h"

#include <array>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>

#include "engine/drafters/sha256.h"
#include "engine/machine.h"

namespace specchat::bench {

std::string cpu_model_name() { return specchat::cpu_model_name(); }

int cpu_cores() { return specchat::cpu_cores(); }

std::string file_sha256(const std::string& path) { return sha256_file_hex(path); }

namespace {
std::string run_capture(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return {};
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p.get())) out += buf;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

std::string git_commit(const std::string& source_dir) {
  const std::string git = "git -C " + shell_quote(source_dir);
  const std::string head = run_capture(git + " rev-parse HEAD 2>/dev/null");
  if (head.size() != 40) return "unknown";
  const std::string dirty = run_capture(git + " status --porcelain --untracked-files=no 2>/dev/null");
  return dirty.empty() ? head : head + "-dirty";
}

std::string utc_now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace specchat::bench

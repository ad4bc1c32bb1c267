#include "app/serve/log.h"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace specchat::serve {

Log::Log(const std::string& level, const std::string& path) {
  if (level == "debug") min_ = LogLevel::debug;
  else if (level == "warn") min_ = LogLevel::warn;
  else if (level == "error") min_ = LogLevel::error;
  if (path.empty()) {
    f_ = stderr;
  } else {
    f_ = std::fopen(path.c_str(), "a");
    if (!f_) throw std::runtime_error("cannot open the log file " + path);
    own_ = true;
  }
}

Log::~Log() {
  if (own_) std::fclose(f_);
}

void Log::write(LogLevel level, const std::string& message) {
  if (level < min_) return;
  static const char* names[] = {"debug", "info", "warn", "error"};
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  std::lock_guard<std::mutex> l(m_);
  std::fprintf(f_, "%s.%03dZ %s %s\n", ts, static_cast<int>(ms), names[static_cast<int>(level)], message.c_str());
  std::fflush(f_);
}

std::string log_quote(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace specchat::serve

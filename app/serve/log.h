// The server's log: one line per event, "<UTC time> <level> <message>", to stderr or a file,
// from any thread. Request lines carry the request id, lengths, drafted and accepted counts and
// times; prompt and reply text only when the server runs with --log-content (issue 14 §6).
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

namespace specchat::serve {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

class Log {
 public:
  // `level`: "debug" | "info" | "warn" | "error"; `path` empty = stderr. Throws
  // std::runtime_error when the file cannot be opened for appending.
  Log(const std::string& level, const std::string& path);
  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  void write(LogLevel level, const std::string& message);
  void info(const std::string& m) { write(LogLevel::info, m); }
  void warn(const std::string& m) { write(LogLevel::warn, m); }
  void error(const std::string& m) { write(LogLevel::error, m); }
  void debug(const std::string& m) { write(LogLevel::debug, m); }

 private:
  std::mutex m_;
  LogLevel min_ = LogLevel::info;
  std::FILE* f_ = nullptr;
  bool own_ = false;
};

// `text` as a JSON string literal (quotes, escapes; invalid UTF-8 replaced): log-safe on one line.
std::string log_quote(const std::string& text);

}  // namespace specchat::serve

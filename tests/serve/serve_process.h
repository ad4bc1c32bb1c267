// `specchat-cli serve` as a child process for C++ tests: started with `--port 0` on loopback, its
// stderr (the log) written to a temporary file, the port read from its "listening on
// http://HOST:PORT" line, stopped with SIGTERM (SIGKILL after a grace period). Every wait is
// bounded. Use with httplib::Client("127.0.0.1", port()).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_paths.h"

namespace specchat::test {

class ServeProcess {
 public:
  // Starts `specchat-cli serve --port 0 <args>` and waits up to `start_timeout_s` for its
  // listening line. Throws std::runtime_error with the log when it exits or stays silent.
  explicit ServeProcess(const std::vector<std::string>& args, int start_timeout_s = 120) {
    log_path_ = (std::filesystem::temp_directory_path() /
                 ("specchat-serve-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++) + ".log"))
                    .string();
    std::vector<std::string> all = {cli_path(), "serve", "--port", "0"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& s : all) argv.push_back(s.data());
    argv.push_back(nullptr);
    const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (log_fd < 0 || null_fd < 0) throw std::runtime_error("ServeProcess: cannot open " + log_path_);
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("ServeProcess: fork failed");
    if (pid_ == 0) {
      dup2(null_fd, STDIN_FILENO);
      dup2(null_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    ::close(log_fd);
    ::close(null_fd);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(start_timeout_s);
    const std::regex listening(R"(listening on http://[^ ]+:(\d+))");
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string text = log();
      if (std::regex_search(text, m, listening)) {
        port_ = std::stoi(m[1].str());
        return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        throw std::runtime_error("the server exited (" + std::to_string(exit_code_) + ") before listening:\n" + log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    stop();
    throw std::runtime_error("the server did not start in time:\n" + log());
  }
  ~ServeProcess() {
    stop();
    std::error_code ec;
    std::filesystem::remove(log_path_, ec);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  // Everything the server logged so far.
  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // SIGTERM, then SIGKILL after `grace_s`. Returns the exit code (-1 when killed by a signal).
  int stop(int grace_s = 20) {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exit_code_;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
};

}  // namespace specchat::test

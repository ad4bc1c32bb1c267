// Runs specchat-cli (or any program) as a child process for tests: fork + execv with an argv
// vector (no shell, so prompts need no quoting), stdout and stderr captured, the exit status or
// terminating signal reported, and stdout parsed as JSON when it is JSON (`--json` output).
//
//   specchat::test::CliResult r = specchat::test::run_cli({"generate", "--json", "-n", "4",
//                                                            "--prompt", "Once upon a time"});
//   INFO(r.describe());
//   REQUIRE(r.exit_code == 0);
//   REQUIRE(r.json_ok);
//
// Safe to call from several threads at once (every pipe is O_CLOEXEC, so one child never holds
// another's pipe open).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_paths.h"

namespace specchat::test {

struct CliResult {
  std::vector<std::string> args;  // argv[1..] as passed
  int exit_code = -1;             // exit status; -1 when the process did not exit normally
  int term_signal = 0;            // signal that ended the process (0 = it exited)
  bool timed_out = false;         // killed by run_process after its time limit
  std::string out, err;           // everything written to stdout / stderr
  nlohmann::json json;            // stdout parsed as one JSON value (discarded when it is not)
  bool json_ok = false;
  double wall_ms = 0;             // fork to exit, as seen from outside (a stopwatch)

  bool exited_cleanly() const { return !timed_out && term_signal == 0 && exit_code >= 0; }

  // A readable summary for INFO(): the command line (long arguments shortened), the status and
  // the start of both outputs.
  std::string describe() const {
    auto clip = [](const std::string& s, size_t n) {
      return s.size() <= n ? s : s.substr(0, n) + "...(" + std::to_string(s.size()) + " bytes)";
    };
    std::string d = "specchat-cli";
    for (const std::string& a : args) d += " '" + clip(a, 60) + "'";
    d += "\n  exit " + std::to_string(exit_code);
    if (term_signal) d += ", signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) + ")";
    if (timed_out) d += ", timed out";
    d += "\n  stdout: " + clip(out, 1500) + "\n  stderr: " + clip(err, 1500);
    return d;
  }
};

// Runs `exe` with `args`, stdin from `stdin_path` (empty: /dev/null). Kills it with SIGKILL
// after `timeout_s`. Throws std::runtime_error when the process cannot be started at all.
inline CliResult run_process(const std::string& exe, const std::vector<std::string>& args,
                             int timeout_s = 180, const std::string& stdin_path = "") {
  CliResult r;
  r.args = args;
  // Everything the child needs is prepared before fork (the child only dup2s and execs).
  std::vector<std::string> all;
  all.reserve(args.size() + 1);
  all.push_back(exe);
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(all.size() + 1);
  for (std::string& s : all) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string exec_failed = "run_process: cannot execute " + exe + "\n";

  int out_p[2], err_p[2];
  if (pipe2(out_p, O_CLOEXEC) != 0) throw std::runtime_error("run_process: pipe2 failed");
  if (pipe2(err_p, O_CLOEXEC) != 0) {
    close(out_p[0]);
    close(out_p[1]);
    throw std::runtime_error("run_process: pipe2 failed");
  }
  const int devnull = open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (devnull < 0 && !stdin_path.empty()) {
    for (int fd : {out_p[0], out_p[1], err_p[0], err_p[1]}) close(fd);
    throw std::runtime_error("run_process: cannot open " + stdin_path);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out_p[0], out_p[1], err_p[0], err_p[1], devnull}) {
      if (fd >= 0) close(fd);
    }
    throw std::runtime_error("run_process: fork failed");
  }
  if (pid == 0) {
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(out_p[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the new descriptor
    dup2(err_p[1], STDERR_FILENO);
    execv(argv[0], argv.data());
    const ssize_t w = write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    _exit(w >= 0 ? 127 : 126);
  }
  close(out_p[1]);
  close(err_p[1]);
  if (devnull >= 0) close(devnull);

  const auto deadline = t0 + std::chrono::seconds(timeout_s);
  pollfd fds[2] = {{out_p[0], POLLIN, 0}, {err_p[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 && !r.timed_out) {
      kill(pid, SIGKILL);  // the pipes close when it dies; keep draining them
      r.timed_out = true;
    }
    const int wait_ms = r.timed_out ? 1000 : static_cast<int>(std::min<long long>(left.count(), 1000));
    const int pr = poll(fds, 2, wait_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) break;
  }
  r.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.term_signal = WTERMSIG(status);
  }
  r.json = nlohmann::json::parse(r.out, nullptr, false);
  r.json_ok = !r.json.is_discarded();
  return r;
}

// Runs the specchat-cli built with the tests.
inline CliResult run_cli(const std::vector<std::string>& args, int timeout_s = 180, const std::string& stdin_path = "") {
  return run_process(cli_path(), args, timeout_s, stdin_path);
}

}  // namespace specchat::test

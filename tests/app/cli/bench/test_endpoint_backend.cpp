// `bench --suite ... --endpoint URL` (issue 15): the runner drives an OpenAI-compatible server,
// here `specchat-cli serve` on the bundled pair. Greedy replies of every configuration equal
// baseline's (compared as text), speculative requests report drafted / accepted tokens from the
// server's timings, configurations no request can select are refused up front, and a server that
// cannot be reached is a failure on every record, not a crash.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "app/cli/bench/aggregate.h"
#include "app/cli/bench/configs.h"
#include "app/cli/bench/endpoint_backend.h"
#include "app/cli/bench/runner.h"

using namespace specchat;
using namespace specchat::bench;

namespace {

// `specchat-cli serve --port 0` in the background; its port from the start-up line on stderr.
struct Server {
  pid_t pid = -1;
  int port = 0;
  std::string log_path;
  Server() {
    char tmpl[] = "/tmp/specchat-serve-XXXXXX";
    const int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    log_path = tmpl;
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      dup2(fd, 2);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      unsetenv("SPECCHAT_API_KEY");
      execl(SPECCHAT_CLI_PATH, SPECCHAT_CLI_PATH, "serve", "--port", "0", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fd);
    const std::regex re("listening on http://[^ ]+:(\\d+)");
    for (int i = 0; i < 1200 && port == 0; ++i) {
      std::ifstream in(log_path);
      std::stringstream ss;
      ss << in.rdbuf();
      std::smatch m;
      const std::string text = ss.str();
      if (std::regex_search(text, m, re)) port = std::stoi(m[1].str());
      if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
        break;
      }
    }
  }
  ~Server() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
    unlink(log_path.c_str());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/v1"; }
};

BenchSuite tiny_suite() {
  BenchSuite s;
  s.name = "tiny";
  s.prompt_format = "chat";
  const char* prompts[][3] = {{"w1", "writing", "Tell me a story about a dog named Max."},
                              {"w2", "writing", "Write a short story for a child."},
                              {"m1", "math", "Tom has 3 apples and buys 5 more. How many apples does he have?"}};
  for (const auto& p : prompts) {
    BenchPrompt bp;
    bp.id = p[0];
    bp.category = p[1];
    bp.turns = {p[2]};
    bp.source = "test";
    s.prompts.push_back(bp);
  }
  return s;
}

}  // namespace

TEST_CASE("bench endpoint: a server runs the sweep, outputs equal baseline's, drafts are reported", "[bench][model]") {
  Server server;
  REQUIRE(server.port > 0);
  EndpointOptions eo;
  eo.url = server.url();
  EndpointBackend be(eo);
  RunOptions ro;
  ro.configs = parse_configs("baseline,chain:k=3,dynamic:n=12:d=4:b=2");
  ro.concurrency = {1, 2};
  ro.max_tokens = 16;
  const BenchRun run = run_suite(be, tiny_suite(), ro, nullptr);
  REQUIRE(run.records.size() == 3 * 3 * 2);
  for (const RequestRecord& r : run.records) {
    INFO(r.prompt_id << " " << r.config << " @" << r.concurrency << ": " << r.error);
    CHECK(r.error.empty());
    CHECK(r.identical);  // greedy: the server's speculative text equals its baseline text
    CHECK(r.output_tokens > 0);
    CHECK(r.output_tokens <= 16);
    CHECK(r.input_tokens > 0);  // estimated: the server's tokenizer is not known here
    CHECK(r.ttft_ms > 0);
    CHECK(r.latency_ms >= r.ttft_ms);
    if (r.config == "baseline") {
      CHECK(r.drafted == 0);
      CHECK(r.steps == r.output_tokens);
    } else {
      CHECK(r.drafted > 0);  // from the server's timings
      CHECK(r.steps == r.output_tokens - r.accepted);
    }
  }
  const Aggregates agg = aggregate(run);
  CHECK(agg.failures == 0);
  for (const GroupAggregate& g : agg.groups)
    if (g.config != "baseline" && g.kind == "all") CHECK(g.tau > 1.0);
}

TEST_CASE("bench endpoint: refused configurations, a bad URL, and a server that is not there", "[bench][unit]") {
  CHECK_THROWS_AS(EndpointBackend::check_configs(parse_configs("baseline,block:k=3")), ConfigError);
  CHECK_THROWS_AS(EndpointBackend::check_configs(parse_configs("baseline,mtp:k=2")), ConfigError);
  CHECK_NOTHROW(EndpointBackend::check_configs(parse_configs("baseline,chain:k=4,dynamic,optimal,ngram:k=3")));
  EndpointOptions bad;
  bad.url = "ftp://example.org";
  CHECK_THROWS(EndpointBackend(bad));

  EndpointOptions nobody;
  nobody.url = "http://127.0.0.1:1/v1";  // nothing listens on port 1
  EndpointBackend be(nobody);
  RunOptions ro;
  ro.configs = parse_configs("baseline,chain:k=3");
  ro.max_tokens = 4;
  const BenchRun run = run_suite(be, tiny_suite(), ro, nullptr);
  REQUIRE(run.records.size() == 6);
  for (const RequestRecord& r : run.records) {
    CHECK(r.failed());
    CHECK(r.error.find("127.0.0.1:1") != std::string::npos);
  }
  CHECK(aggregate(run).failures == 6);
}

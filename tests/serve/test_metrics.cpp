// ServeMetrics (app/serve/metrics.h): counters are the sums of the requests' statistics,
// accepted tokens by draft position come from the accepted-length histogram, and the text is
// the Prometheus exposition format (every sample preceded by its HELP/TYPE, cumulative buckets).
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "app/serve/metrics.h"

using namespace specchat;
using namespace specchat::serve;

namespace {
// The value of the sample line that starts with `name` followed by a space.
double sample(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  FAIL("no sample " << name);
  return 0;
}
}  // namespace

TEST_CASE("metrics: counters sum the generations, positions follow accepted_hist", "[unit]") {
  ServeMetrics m;
  GenerationStats a;
  a.n_prompt = 10;
  a.n_generated = 9;
  a.n_drafted = 12;
  a.n_accepted = 6;
  a.n_steps = 3;
  a.decode_ms = 90;
  a.accepted_hist = {0, 1, 1, 1};  // steps accepting 1, 2 and 3 drafts
  GenerationStats b;
  b.n_prompt = 5;
  b.n_generated = 2;
  b.n_drafted = 8;
  b.n_accepted = 0;
  b.n_steps = 2;
  b.decode_ms = 10;
  b.accepted_hist = {2, 0, 0, 0, 0};
  m.on_generation(a);
  m.on_generation(b);
  m.count_request("ok");
  m.count_request("ok");
  m.count_request("rejected");
  m.observe_ttft_ms(30);
  m.observe_e2e_ms(2000);
  m.set_load(2, 3, 77);
  const std::string t = m.render();
  CHECK(sample(t, "specchat:prompt_tokens_total") == 15);
  CHECK(sample(t, "specchat:generation_tokens_total") == 11);
  CHECK(sample(t, "specchat:draft_tokens_total") == 20);
  CHECK(sample(t, "specchat:accepted_tokens_total") == 6);
  CHECK(sample(t, "specchat:accepted_tokens_by_position_total{position=\"1\"}") == 3);
  CHECK(sample(t, "specchat:accepted_tokens_by_position_total{position=\"2\"}") == 2);
  CHECK(sample(t, "specchat:accepted_tokens_by_position_total{position=\"3\"}") == 1);
  CHECK(sample(t, "specchat:accepted_tokens_by_position_total{position=\"4\"}") == 0);
  CHECK(sample(t, "specchat:requests_total{outcome=\"ok\"}") == 2);
  CHECK(sample(t, "specchat:requests_total{outcome=\"rejected\"}") == 1);
  CHECK(sample(t, "specchat:requests_total{outcome=\"timeout\"}") == 0);
  CHECK(sample(t, "specchat:requests_processing") == 2);
  CHECK(sample(t, "specchat:requests_deferred") == 3);
  CHECK(sample(t, "specchat:kv_cache_used_tokens") == 77);
  CHECK(sample(t, "specchat:resident_memory_bytes") > 0);
  // accepted length per step: 2 steps of 0, one each of 1, 2, 3; buckets are cumulative
  CHECK(sample(t, "specchat:accepted_length_per_step_bucket{le=\"0\"}") == 2);
  CHECK(sample(t, "specchat:accepted_length_per_step_bucket{le=\"1\"}") == 3);
  CHECK(sample(t, "specchat:accepted_length_per_step_bucket{le=\"3\"}") == 5);
  CHECK(sample(t, "specchat:accepted_length_per_step_bucket{le=\"+Inf\"}") == 5);
  CHECK(sample(t, "specchat:accepted_length_per_step_sum") == 6);
  CHECK(sample(t, "specchat:accepted_length_per_step_count") == 5);
  // TPOT: 10 ms and 5 ms per token, in seconds
  CHECK(sample(t, "specchat:time_per_output_token_seconds_count") == 2);
  CHECK(sample(t, "specchat:time_per_output_token_seconds_sum") == Approx(0.015));
  CHECK(sample(t, "specchat:time_to_first_token_seconds_bucket{le=\"0.025\"}") == 0);
  CHECK(sample(t, "specchat:time_to_first_token_seconds_bucket{le=\"0.05\"}") == 1);
  CHECK(sample(t, "specchat:e2e_request_latency_seconds_sum") == Approx(2.0));
}

TEST_CASE("metrics: every sample's family has HELP and TYPE before it", "[unit]") {
  ServeMetrics m;
  const std::string t = m.render();
  std::istringstream in(t);
  std::string line, typed;
  int samples = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      typed = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    if (line.rfind("#", 0) == 0 || line.empty()) continue;
    ++samples;
    INFO(line);
    CHECK(line.rfind(typed, 0) == 0);
    CHECK(line.rfind("specchat:", 0) == 0);
  }
  CHECK(samples > 20);
}

// PIPO's monitoring in the server: the /metrics families (sums of the replies' counters, HELP and
// TYPE before every sample, the release as an escaped label, promtool's check) and the
// response's "pipo" object (pipo_report_json: label, settings, counters, lengths).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "app/serve/metrics.h"
#include "app/serve/pipo_service.h"
#include "serve/promtool_check.h"

using namespace specchat;
using namespace specchat::serve;
using nlohmann::json;

namespace {

double sample(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  FAIL("no sample " << name);
  return 0;
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("pipo metrics: counters are the sums of the replies, with HELP and TYPE", "[unit][pipo]") {
  ServeMetrics m;
  const std::string empty = m.render();
  // Rendered without a release too (zeros), but no release label then.
  CHECK(sample(empty, "specchat:pipo_requests_total") == 0);
  CHECK(sample(empty, "specchat:pipo_steps_total") == 0);
  CHECK(empty.find("pipo_release_info") == std::string::npos);

  m.set_pipo_release("rel-1");
  PipoTotals a;
  a.steps = 5;
  a.head_runs = 4;
  a.token2_accepted = 3;
  a.raw_tokens = 8;
  a.latent_pairs = 12;
  a.raw_length = 20;
  PipoTotals b;
  b.steps = 2;
  b.head_runs = 0;
  b.token2_accepted = 0;
  b.raw_tokens = 2;
  b.latent_pairs = 4;
  b.raw_length = 7;
  m.on_pipo(a);
  m.on_pipo(b);
  m.set_pipo_load(1, 2);
  const std::string t = m.render();
  CHECK(sample(t, "specchat:pipo_requests_total") == 2);
  CHECK(sample(t, "specchat:pipo_steps_total") == 7);
  CHECK(sample(t, "specchat:pipo_head_runs_total") == 4);
  CHECK(sample(t, "specchat:pipo_token2_accepted_total") == 3);
  CHECK(sample(t, "specchat:pipo_raw_tokens_total") == 10);
  CHECK(sample(t, "specchat:pipo_latent_pairs_total") == 16);
  CHECK(sample(t, "specchat:pipo_raw_length_tokens_total") == 27);
  CHECK(sample(t, "specchat:pipo_requests_processing") == 1);
  CHECK(sample(t, "specchat:pipo_requests_deferred") == 2);
  CHECK(sample(t, "specchat:pipo_release_info{release=\"rel-1\"}") == 1);
  for (const char* name : {"pipo_requests_total", "pipo_steps_total", "pipo_head_runs_total", "pipo_token2_accepted_total",
                           "pipo_raw_tokens_total", "pipo_latent_pairs_total", "pipo_raw_length_tokens_total"}) {
    INFO(name);
    CHECK(has_line(t, std::string("# TYPE specchat:") + name + " counter"));
    CHECK(t.find(std::string("# HELP specchat:") + name + " ") != std::string::npos);
  }
  CHECK(has_line(t, "# TYPE specchat:pipo_release_info gauge"));
  // The lossless counters are untouched by on_pipo (a PIPO reply's timings go to on_generation).
  CHECK(sample(t, "specchat:generation_tokens_total") == 0);
  // Every sample follows its family's TYPE line.
  std::istringstream in(t);
  std::string line, typed;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      typed = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    INFO(line);
    CHECK(line.rfind(typed, 0) == 0);
  }
}

TEST_CASE("pipo metrics: a reply cut off by a timeout or a cancel is not counted as a reply", "[unit][pipo]") {
  // Regression: pipo_requests_total counted timed-out requests (the client got a 504) as replies.
  ServeMetrics m;
  PipoTotals done;
  done.steps = 3;
  done.raw_tokens = 5;
  PipoTotals cut;
  cut.steps = 2;
  cut.raw_tokens = 3;
  cut.completed = false;
  m.on_pipo(done);
  m.on_pipo(cut);
  const std::string t = m.render();
  CHECK(sample(t, "specchat:pipo_requests_total") == 1);
  // The work a cut-off request did is still counted.
  CHECK(sample(t, "specchat:pipo_steps_total") == 5);
  CHECK(sample(t, "specchat:pipo_raw_tokens_total") == 8);
}

TEST_CASE("metrics: whole numbers print as integers and never in exponent form", "[unit][pipo]") {
  // Regression: the shortest %g form printed a counter of 10 as 1e+01.
  ServeMetrics m;
  PipoTotals a;
  a.steps = 10;
  a.raw_tokens = 100;
  a.raw_length = 123456789;
  for (int i = 0; i < 10; ++i) m.on_pipo(a);
  const std::string t = m.render();
  CHECK(has_line(t, "specchat:pipo_requests_total 10"));
  CHECK(has_line(t, "specchat:pipo_steps_total 100"));
  CHECK(has_line(t, "specchat:pipo_raw_tokens_total 1000"));
  CHECK(has_line(t, "specchat:pipo_raw_length_tokens_total 1234567890"));
  CHECK(t.find("e+") == std::string::npos);
  // Fractions keep their shortest form (bucket bounds).
  CHECK(t.find("le=\"0.025\"") != std::string::npos);
}

TEST_CASE("pipo metrics: the release label is escaped", "[unit][pipo]") {
  ServeMetrics m;
  m.set_pipo_release("a\"b\\c\nd");
  const std::string t = m.render();
  CHECK(t.find("specchat:pipo_release_info{release=\"a\\\"b\\\\c\\nd\"} 1\n") != std::string::npos);
}

TEST_CASE("pipo metrics: promtool accepts the exposition", "[unit][pipo]") {
  if (!std::filesystem::exists(test::promtool_path())) {
    WARN("SKIPPED: promtool is not installed (Debian's prometheus package; scripts/setup installs it)");
    return;
  }
  ServeMetrics m;
  m.set_pipo_release("specchat-pipo-2026-12-03.1");
  PipoTotals a;
  a.steps = 3;
  a.head_runs = 2;
  a.token2_accepted = 1;
  a.raw_tokens = 4;
  a.latent_pairs = 9;
  a.raw_length = 13;
  m.on_pipo(a);
  GenerationStats s;
  s.n_prompt = 9;
  s.n_generated = 4;
  s.n_steps = 3;
  s.decode_ms = 8;
  m.on_generation(s);
  const std::string text = m.render();
  CHECK(text.find("specchat:pipo_release_info") != std::string::npos);
  CHECK(test::promtool_problems(text).empty());
  // The check can fail: a family without TYPE, or a counter not ending in _total, is reported.
  CHECK_FALSE(test::promtool_problems("# HELP specchat:pipo_bad A counter.\n# TYPE specchat:pipo_bad counter\n"
                                      "specchat:pipo_bad 1\n").empty());
}

TEST_CASE("pipo report: the response's extension object", "[unit][pipo]") {
  PipoReleaseInfo info;
  info.release = "rel-9";
  PipoSettings st;
  st.acceptance_threshold = 0.4f;
  st.raw_context = 100;
  PipoReply r;
  r.prompt_pairs = 5;  // a 9-token prompt, pair-aligned
  r.reused_pairs = 3;
  r.new_pairs = {10, 11, 12, kPipoPad, 13, 14, 2, kPipoPad};  // four steps: 6 raw tokens
  r.raw = {10, 11, 12, 13, 14, 2};
  r.counters.steps = 4;
  r.counters.head_runs = 3;
  r.counters.accepted = 2;
  r.counters.raw_tokens = 6;
  r.stop_reason = "stop";
  r.ttft_s = 0.01;
  r.total_s = 0.05;
  const json j = pipo_report_json(info, st, r, 9, 64, true);
  CHECK(j["mode"] == "pipo");
  CHECK(j["approximate"] == true);
  CHECK(j["label"] == "approximate: not verified by the target");
  CHECK(j["release"] == "rel-9");
  CHECK(j["settings"]["pair_size"] == 2);
  CHECK(j["settings"]["extra_draft_tokens"] == 1);
  CHECK(j["settings"]["acceptance_threshold"].get<double>() == Approx(0.4));
  CHECK(j["settings"]["raw_context"] == 100);
  CHECK(j["settings"]["latent_context"] == 64);  // min(backbone cache 64, raw 100)
  CHECK(j["steps"] == 4);
  CHECK(j["head_runs"] == 3);
  CHECK(j["token2_accepted"] == 2);
  CHECK(j["token2_acceptance_rate"].get<double>() == Approx(2.0 / 3.0));
  CHECK(j["tokens_per_step"].get<double>() == Approx(1.5));
  CHECK(j["latent_length"] == 9);   // 5 prompt pairs + 4 reply pairs
  CHECK(j["raw_length"] == 15);     // 9 prompt tokens + 6 reply tokens
  CHECK(j["compression"].get<double>() == Approx(15.0 / 9.0));
  CHECK(j["prompt_pairs"] == 5);
  CHECK(j["reused_pairs"] == 3);
  CHECK(j["continued_from_latents"] == true);
  CHECK(j["stop_reason"] == "stop");
  CHECK(j["ttft_ms"].get<double>() == Approx(10.0));
  CHECK(j["total_ms"].get<double>() == Approx(50.0));
  const json l = pipo_label_json();
  CHECK(l == json{{"approximate", true}, {"label", "approximate: not verified by the target"}});
}

TEST_CASE("pipo metrics: the fidelity gauge's samples and KL are summed, the largest kept", "[unit][pipo]") {
  ServeMetrics m;
  PipoTotals a;
  a.fidelity_samples = 3;
  a.fidelity_kl_sum = 0.3;
  a.fidelity_kl_max = 0.2;
  PipoTotals b;
  b.fidelity_samples = 1;
  b.fidelity_kl_sum = 0.5;
  b.fidelity_kl_max = 0.5;
  m.on_pipo(a);
  m.on_pipo(b);
  const std::string t = m.render();
  CHECK(sample(t, "specchat:pipo_fidelity_samples_total") == 4);
  CHECK(sample(t, "specchat:pipo_fidelity_kl_nats_total") == Approx(0.8));
  CHECK(sample(t, "specchat:pipo_fidelity_kl_max_nats") == Approx(0.5));
  CHECK(has_line(t, "# TYPE specchat:pipo_fidelity_kl_max_nats gauge"));
}

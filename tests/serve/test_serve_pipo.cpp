// `specchat-cli serve --pipo` end to end (a child process on loopback, httplib as the client) with
// a tiny PIPO release unit bound to the bundled target's sha256 (engine/pipo/pipo_fixture.h):
// the start-up log names the release and the parts that loaded; PIPO requests are labelled
// approximate and carry the mode's counters (also streamed), lossless ones are untouched; bad
// PIPO requests are 400 and the server lives on; /metrics sums the replies' counters and
// promtool accepts it; /health names the release; a server without a unit refuses PIPO requests;
// a release made from another target stops the start-up with exit 1.
#include <catch2/catch.hpp>

#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cli_runner.h"
#include "engine/drafters/sha256.h"
#include "engine/pipo/pipo_fixture.h"
#include "serve/promtool_check.h"
#include "serve/serve_process.h"

using namespace specchat;
using namespace specchat::test;
using nlohmann::json;

namespace {

constexpr const char* kLabel = "approximate: not verified by the target";

// A unit bound to the bundled target (as test_cli_pipo.cpp's), its context the target's.
struct BoundUnit {
  PipoFixture f{1024};
  BoundUnit() {
    f.target_sha = sha256_file_hex(target_model());
    f.write();
  }
  std::string dir() const { return f.dir.path.string(); }
};

struct Reply {
  int status = 0;
  json body;
  std::string raw;
};

Reply post(httplib::Client& c, const std::string& path, const json& body) {
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  REQUIRE(r);
  Reply out;
  out.status = r->status;
  out.raw = r->body;
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

json get(httplib::Client& c, const std::string& path, int* status = nullptr) {
  auto r = c.Get(path.c_str());
  REQUIRE(r);
  if (status) *status = r->status;
  return json::parse(r->body, nullptr, false);
}

std::string get_text(httplib::Client& c, const std::string& path) {
  auto r = c.Get(path.c_str());
  REQUIRE(r);
  REQUIRE(r->status == 200);
  return r->body;
}

double sample(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  FAIL("no sample " << name);
  return 0;
}

// The data events of an SSE body ("data: {...}" lines; [DONE] last).
std::vector<json> sse_events(const std::string& body, bool* done) {
  std::vector<json> out;
  *done = false;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    REQUIRE(line.rfind("data: ", 0) == 0);
    const std::string payload = line.substr(6);
    if (payload == "[DONE]") {
      *done = true;
      continue;
    }
    CHECK_FALSE(*done);
    out.push_back(json::parse(payload));
  }
  return out;
}

// The counters every PIPO reply's "pipo" object must hold, consistent with each other.
void check_report(const json& p, double threshold, int max_tokens) {
  INFO(p.dump());
  REQUIRE(p.is_object());
  CHECK(p["approximate"] == true);
  CHECK(p["label"] == kLabel);
  CHECK(p["release"] == "test-release-1");
  CHECK(p["settings"]["pair_size"] == 2);
  CHECK(p["settings"]["extra_draft_tokens"] == 1);
  CHECK(p["settings"]["acceptance_threshold"].get<double>() == Approx(threshold));
  const long steps = p["steps"], head = p["head_runs"], kept = p["token2_accepted"];
  CHECK(steps > 0);
  CHECK(head <= steps);
  CHECK(kept <= head);
  CHECK(p["token2_acceptance_rate"].get<double>() == Approx(head ? double(kept) / double(head) : 0.0));
  const double tps = p["tokens_per_step"];
  CHECK(tps >= 1.0);
  CHECK(tps <= 2.0);
  CHECK(p["latent_length"].get<long>() <= p["raw_length"].get<long>());
  CHECK(p["latent_length"].get<long>() > 0);
  CHECK(static_cast<long>(std::lround(tps * static_cast<double>(steps))) <= max_tokens + 1);
  CHECK(p.contains("continued_from_latents"));
}

}  // namespace

TEST_CASE("serve --pipo: approximate replies carry the counters and show in metrics and health", "[model][serve][pipo]") {
  BoundUnit u;
  // The release and its default threshold from the config file (the flags' twin).
  const std::string cfg = u.f.dir.file("serve.json");
  {
    std::ofstream out(cfg);
    out << json{{"pipo", u.dir()}, {"pipo_threshold", 0.3}, {"pipo_pair_size", 2}}.dump();
  }
  ServeProcess srv({"--config", cfg, "--draft", "none", "--parallel", "2", "--queue", "4"});
  INFO(srv.log());
  const std::string startup = srv.log();
  CHECK(startup.find("PIPO release 'test-release-1'") != std::string::npos);
  CHECK(startup.find("backbone " + u.f.path("backbone")) != std::string::npos);
  CHECK(startup.find("MTP head " + u.f.path("mtp")) != std::string::npos);
  CHECK(startup.find("compressor + confidence head " + u.f.path("io")) != std::string::npos);
  CHECK(startup.find("PIPO is approximate") != std::string::npos);
  CHECK(startup.find("acceptance_threshold 0.30") != std::string::npos);
  CHECK(startup.find("pipo=test-release-1") != std::string::npos);
  httplib::Client c("127.0.0.1", srv.port());
  c.set_read_timeout(120, 0);

  int status = 0;
  const json health = get(c, "/health", &status);
  CHECK(status == 200);
  CHECK(health["status"] == "ok");
  CHECK(health["pipo"]["release"] == "test-release-1");
  CHECK(health["pipo"]["approximate"] == true);
  const json models = get(c, "/v1/models");
  CHECK(models["data"][0]["meta"]["pipo"]["release"] == "test-release-1");
  CHECK(models["data"][0]["meta"]["pipo"]["acceptance_threshold"].get<double>() == Approx(0.3));

  long steps = 0, head_runs = 0, kept = 0, latent = 0, raw_len = 0, completion_tokens = 0, pipo_ok = 0;
  auto count = [&](const json& body) {
    const json& p = body["pipo"];
    // The report says how the reply ended as finish_reason does.
    const std::string finish = body["choices"][0]["finish_reason"];
    CHECK(p["stop_reason"] == (finish == "length" ? (p["stop_reason"] == "context" ? "context" : "length") : finish));
    steps += p["steps"].get<long>();
    head_runs += p["head_runs"].get<long>();
    kept += p["token2_accepted"].get<long>();
    latent += p["latent_length"].get<long>();
    raw_len += p["raw_length"].get<long>();
    completion_tokens += body["usage"]["completion_tokens"].get<long>();
    ++pipo_ok;
  };

  // Greedy PIPO on the completion endpoint: what `generate --pipo` gives for the same prompt.
  const Reply first = post(c, "/v1/completions",
                           {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"decode_mode", "pipo"}});
  REQUIRE(first.status == 200);
  INFO(first.raw);
  check_report(first.body["pipo"], 0.3, 12);
  CHECK(first.body["timings"]["draft_n"] == 0);  // nothing proposed to the target
  CHECK(first.body["usage"]["completion_tokens"].get<int>() <= 12);
  count(first.body);
  const CliResult cli = run_cli({"generate", "--pipo", u.dir(), "--pipo-threshold", "0.3", "--prompt", "Once upon a time",
                                 "-n", "12", "--json"});
  REQUIRE(cli.exit_code == 0);
  CHECK(first.body["choices"][0]["text"] == cli.json["text"]);
  CHECK(first.body["pipo"]["steps"] == cli.json["pipo"]["steps"]);
  CHECK(first.body["pipo"]["head_runs"] == cli.json["pipo"]["head_runs"]);

  // Chat, the request's own threshold; 1 never runs the head.
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}}, {"max_tokens", 10},
                     {"decode_mode", "pipo"}, {"acceptance_threshold", 0.1}};
  const Reply r1 = post(c, "/v1/chat/completions", chat);
  REQUIRE(r1.status == 200);
  check_report(r1.body["pipo"], 0.1, 10);
  CHECK(r1.body["object"] == "chat.completion");
  count(r1.body);
  json one = chat;
  one["acceptance_threshold"] = 1;
  const Reply r2 = post(c, "/v1/chat/completions", one);
  REQUIRE(r2.status == 200);
  check_report(r2.body["pipo"], 1.0, 10);
  CHECK(r2.body["pipo"]["head_runs"] == 0);
  CHECK(r2.body["pipo"]["tokens_per_step"].get<double>() == Approx(1.0));
  count(r2.body);

  // Streamed: every chunk labelled, the last one with the counters; the text is the
  // non-streamed reply's (greedy).
  json streamed = chat;
  streamed["stream"] = true;
  const Reply s = post(c, "/v1/chat/completions", streamed);
  REQUIRE(s.status == 200);
  bool done = false;
  const std::vector<json> events = sse_events(s.raw, &done);
  CHECK(done);
  REQUIRE(events.size() >= 2);
  std::string text;
  for (const json& e : events) {
    INFO(e.dump());
    CHECK(e["pipo"]["approximate"] == true);
    CHECK(e["pipo"]["label"] == kLabel);
    text += e["choices"][0]["delta"].value("content", "");
  }
  check_report(events.back()["pipo"], 0.1, 10);
  CHECK(events.back()["choices"][0]["finish_reason"].is_string());
  CHECK(text == r1.body["choices"][0]["message"]["content"].get<std::string>());
  count(events.back());

  // A lossless request is untouched: no "pipo" object, verified decoding.
  const Reply lossless = post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}});
  REQUIRE(lossless.status == 200);
  CHECK_FALSE(lossless.body.contains("pipo"));

  // PIPO and lossless requests at once: PIPO ones take turns on the unit, all answer.
  std::vector<std::future<Reply>> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(std::async(std::launch::async, [&, i] {
      httplib::Client ci("127.0.0.1", srv.port());
      ci.set_read_timeout(120, 0);
      json b = {{"prompt", "The little dog " + std::to_string(i)}, {"max_tokens", 6}};
      if (i < 2) b["decode_mode"] = "pipo";
      auto r = ci.Post("/v1/completions", b.dump(), "application/json");
      Reply out;
      if (r) {
        out.status = r->status;
        out.body = json::parse(r->body, nullptr, false);
      }
      return out;
    }));
  }
  for (int i = 0; i < 3; ++i) {
    const Reply r = jobs[static_cast<size_t>(i)].get();
    INFO("concurrent " << i);
    REQUIRE(r.status == 200);
    CHECK(r.body.contains("pipo") == (i < 2));
    if (i < 2) count(r.body);
  }

  // Bad PIPO requests: 400 in OpenAI's shape, and the server lives on.
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"prompt", "x"}, {"decode_mode", "pipo"}, {"acceptance_threshold", 1.5}}, "acceptance_threshold"},
      {{{"prompt", "x"}, {"decode_mode", "pipo"}, {"acceptance_threshold", "0.5"}}, "acceptance_threshold"},
      {{{"prompt", "x"}, {"acceptance_threshold", 0.5}}, "acceptance_threshold"},
      {{{"prompt", "x"}, {"decode_mode", "fast"}}, "decode_mode"},
      {{{"prompt", "x"}, {"decode_mode", nullptr}, {"acceptance_threshold", 0.5}}, "acceptance_threshold"},
      {{{"prompt", "x"}, {"decode_mode", "pipo"}, {"draft_k", 3}}, "draft_k"},
  };
  for (const auto& [body, param] : bad) {
    INFO(body.dump());
    const Reply r = post(c, "/v1/completions", body);
    CHECK(r.status == 400);
    CHECK(r.body["error"]["param"] == param);
    CHECK(r.body["error"]["type"] == "invalid_request_error");
  }
  // A prompt longer than the context: 400, nothing decoded.
  std::string long_prompt;
  for (int i = 0; i < 1200; ++i) long_prompt += "dog ";
  const Reply too_long = post(c, "/v1/completions", {{"prompt", long_prompt}, {"decode_mode", "pipo"}, {"max_tokens", 4}});
  CHECK(too_long.status == 400);
  CHECK(too_long.body["error"]["code"] == "context_length_exceeded");
  get(c, "/health", &status);
  CHECK(status == 200);

  // /metrics: the PIPO families sum the replies' counters; promtool accepts the page.
  const std::string metrics = get_text(c, "/metrics");
  CHECK(sample(metrics, "specchat:pipo_requests_total") == pipo_ok);
  CHECK(sample(metrics, "specchat:pipo_steps_total") == steps);
  CHECK(sample(metrics, "specchat:pipo_head_runs_total") == head_runs);
  CHECK(sample(metrics, "specchat:pipo_token2_accepted_total") == kept);
  CHECK(sample(metrics, "specchat:pipo_latent_pairs_total") == latent);
  CHECK(sample(metrics, "specchat:pipo_raw_length_tokens_total") == raw_len);
  CHECK(sample(metrics, "specchat:pipo_raw_tokens_total") >= completion_tokens);  // + end-of-turn tokens
  CHECK(sample(metrics, "specchat:pipo_release_info{release=\"test-release-1\"}") == 1);
  CHECK(sample(metrics, "specchat:pipo_requests_processing") == 0);
  if (std::filesystem::exists(promtool_path())) {
    CHECK(promtool_problems(metrics).empty());
  } else {
    WARN("promtool is not installed: the exposition was not checked by it");
  }
  // The request log line says the mode.
  CHECK(srv.log().find("mode=pipo approximate=true") != std::string::npos);
  CHECK(srv.stop() == 0);
}

TEST_CASE("serve without --pipo refuses PIPO requests with 400", "[model][serve][pipo]") {
  ServeProcess srv({"--draft", "none", "--parallel", "1"});
  httplib::Client c("127.0.0.1", srv.port());
  c.set_read_timeout(60, 0);
  const Reply r = post(c, "/v1/chat/completions",
                       {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"decode_mode", "pipo"}});
  CHECK(r.status == 400);
  CHECK(r.body["error"]["code"] == "pipo_unavailable");
  CHECK(r.body["error"]["param"] == "decode_mode");
  CHECK(r.body["error"]["message"].get<std::string>().find("--pipo") != std::string::npos);
  const json health = get(c, "/health");
  CHECK(health["status"] == "ok");
  CHECK_FALSE(health.contains("pipo"));
  CHECK(post(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}}).status == 200);
  CHECK(srv.stop() == 0);
}

TEST_CASE("serve --pipo refuses a release made from another target at start-up", "[model][serve][pipo]") {
  PipoFixture f;  // target.sha256 = "aaa…": not the bundled target
  f.write();
  const CliResult r = run_cli({"serve", "--port", "0", "--draft", "none", "--pipo", f.dir.path.string()}, 120);
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("PIPO release refused") != std::string::npos);
  CHECK(r.err.find("listening on") == std::string::npos);
  // A bad threshold in the config file stops it before anything loads (exit 2).
  const std::string cfg = f.dir.file("bad.json");
  {
    std::ofstream out(cfg);
    out << R"({"pipo": ")" << f.dir.path.string() << R"(", "pipo_extra_draft_tokens": 2})";
  }
  const CliResult b = run_cli({"serve", "--port", "0", "--config", cfg}, 60);
  INFO(b.describe());
  CHECK(b.exit_code == 2);
  CHECK(b.err.find("pipo_extra_draft_tokens") != std::string::npos);
}

TEST_CASE("serve --pipo-fidelity samples the KL of token 1 into the reply and /metrics", "[model][serve][pipo]") {
  // Issue 16 "Monitoring": the fidelity gauge was in the CLI only.
  BoundUnit u;
  ServeProcess srv({"--draft", "none", "--parallel", "1", "--pipo", u.dir(), "--pipo-threshold", "0.3",
                    "--pipo-fidelity", "2"});
  INFO(srv.log());
  CHECK(srv.log().find("fidelity gauge 1 step in 2") != std::string::npos);
  httplib::Client c("127.0.0.1", srv.port());
  c.set_read_timeout(120, 0);
  const Reply r = post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"decode_mode", "pipo"}});
  INFO(r.raw);
  REQUIRE(r.status == 200);
  const json& f = r.body["pipo"]["fidelity"];
  REQUIRE(f.is_object());
  CHECK(f["every"] == 2);
  const int samples = f["samples"];
  CHECK(samples >= 1);
  CHECK(samples <= r.body["pipo"]["steps"].get<int>());
  CHECK(f["mean_kl"].get<double>() >= 0);
  CHECK(f["max_kl"].get<double>() >= f["mean_kl"].get<double>());
  const std::string m = get_text(c, "/metrics");
  CHECK(sample(m, "specchat:pipo_fidelity_samples_total") == samples);
  CHECK(sample(m, "specchat:pipo_fidelity_kl_nats_total") == Approx(f["mean_kl"].get<double>() * samples).epsilon(1e-6));
  CHECK(sample(m, "specchat:pipo_fidelity_kl_max_nats") == Approx(f["max_kl"].get<double>()));
  CHECK(srv.stop() == 0);
  // Without a release the setting is refused.
  const CliResult bad = run_cli({"serve", "--port", "0", "--draft", "none", "--pipo-fidelity", "4"}, 60);
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("pipo_fidelity") != std::string::npos);
}

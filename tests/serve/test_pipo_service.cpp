// PipoService (app/serve/pipo_service.h) in-process, on a tiny PIPO release unit bound to the
// bundled target (engine/pipo/pipo_fixture.h): a job's text, counters and metrics; the next turn
// continues from the last reply's latents; stop strings, max_tokens 0, cancellation and deadlines;
// a prompt past the context is a 400 and the service goes on; the queue's bound and stop().
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <sstream>

#include "app/serve/pipo_service.h"
#include "engine/drafters/sha256.h"
#include "engine/pipo/pipo_fixture.h"

using namespace specchat;
using namespace specchat::serve;
using namespace specchat::test;
using nlohmann::json;

namespace {

constexpr int kContext = 256;  // raw tokens (and pairs) the service's sequence may hold

// A unit bound to the bundled target, loaded for serving, with the target's vocabulary.
struct Served {
  PipoFixture f{kContext};
  std::unique_ptr<LlamaModel> target;
  Served() {
    f.target_sha = sha256_file_hex(target_model());
    f.write();
    target = LlamaModel::load(target_model());
  }
  PipoUnit load() const {
    return load_serve_pipo_unit(f.dir.path.string(), target_model(), target->vocab(), kContext, 1, BackendKind::cpu);
  }
};

const std::vector<int32_t> kPrompt = {1, 3, 523, 1207, 88, 4000, 17, 6, 4, 250, 251};  // 11 raw ids

std::shared_ptr<Job> job(std::vector<int32_t> prompt, int max_tokens, float threshold = 0.3f) {
  auto j = std::make_shared<Job>();
  j->req.prompt = std::move(prompt);
  j->req.max_tokens = max_tokens;
  j->pipo = true;
  j->pipo_threshold = threshold;
  j->arrived = Clock::now();
  j->deadline = j->arrived + std::chrono::seconds(120);
  return j;
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

}  // namespace

TEST_CASE("pipo service: a job streams its text and reports the counters", "[model][serve][pipo]") {
  Served s;
  ServeMetrics metrics;
  PipoService svc(s.load(), -1, kContext, 2, metrics);
  CHECK(svc.default_threshold() == Approx(0.5f));  // the fixture's recommended_threshold
  CHECK(svc.latent_context() == kContext);
  CHECK(svc.describe()["release"] == "test-release-1");
  CHECK(svc.describe()["approximate"] == true);

  auto a = job(kPrompt, 8);
  svc.run(*a);
  REQUIRE(a->done);
  REQUIRE_FALSE(a->error);
  const GenerationResult& r = a->result;
  CHECK(r.finish == FinishReason::length);
  CHECK(r.tokens.size() == 8);
  CHECK(a->released == r.text);  // everything released by the end
  CHECK(a->ttft_ms >= 0);
  CHECK(r.stats.n_prompt == 11);
  CHECK(r.stats.n_generated == 8);
  CHECK(r.stats.n_drafted == 0);
  const json& p = a->pipo_report;
  INFO(p.dump());
  CHECK(p["approximate"] == true);
  CHECK(p["release"] == "test-release-1");
  CHECK(p["settings"]["acceptance_threshold"].get<double>() == Approx(0.3));
  CHECK(p["stop_reason"] == "length");
  CHECK(p["continued_from_latents"] == false);
  CHECK(p["prompt_pairs"] == 6);
  const long steps = p["steps"];
  CHECK(r.stats.n_steps == steps);
  CHECK(p["latent_length"] == 6 + steps);
  CHECK(p["raw_length"] == 11 + 8);
  CHECK(p["tokens_per_step"].get<double>() == Approx(8.0 / static_cast<double>(steps)));

  const std::string m = metrics.render();
  CHECK(sample(m, "specchat:pipo_requests_total") == 1);
  CHECK(sample(m, "specchat:pipo_steps_total") == steps);
  CHECK(sample(m, "specchat:pipo_head_runs_total") == p["head_runs"].get<double>());
  CHECK(sample(m, "specchat:pipo_token2_accepted_total") == p["token2_accepted"].get<double>());
  CHECK(sample(m, "specchat:pipo_raw_tokens_total") == 8);
  CHECK(sample(m, "specchat:pipo_latent_pairs_total") == 6 + steps);
  CHECK(sample(m, "specchat:pipo_raw_length_tokens_total") == 19);
  CHECK(sample(m, "specchat:generation_tokens_total") == 8);
  CHECK(sample(m, "specchat:prompt_tokens_total") == 11);
  CHECK(sample(m, "specchat:draft_tokens_total") == 0);
  CHECK(sample(m, "specchat:pipo_release_info{release=\"test-release-1\"}") == 1);

  // The next turn (this reply's tokens, then more) continues from the reply's latents: every
  // pair it left is reused, none re-paired.
  std::vector<int32_t> next = kPrompt;
  next.insert(next.end(), r.tokens.begin(), r.tokens.end());
  next.insert(next.end(), {42, 43, 44});
  auto b = job(next, 4);
  svc.run(*b);
  REQUIRE_FALSE(b->error);
  CHECK(b->pipo_report["continued_from_latents"] == true);
  CHECK(b->pipo_report["reused_pairs"] == 6 + steps);
  CHECK(b->pipo_report["raw_length"] == 11 + 8 + 3 + 4);
  // Another conversation is pair-aligned afresh (its shared prefix still reused).
  auto c = job(kPrompt, 4);
  svc.run(*c);
  REQUIRE_FALSE(c->error);
  CHECK(c->pipo_report["continued_from_latents"] == false);
  CHECK(c->pipo_report["reused_pairs"] == 5);  // the whole pairs before the prompt's padded last one
  // Greedy decoding from the same prompt repeats the first reply's start.
  CHECK(std::vector<int32_t>(c->result.tokens.begin(), c->result.tokens.end()) ==
        std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + static_cast<long>(c->result.tokens.size())));
}

TEST_CASE("pipo service: stop strings, max_tokens 0, cancellation and deadlines", "[model][serve][pipo]") {
  Served s;
  ServeMetrics metrics;
  PipoService svc(s.load(), 0.3, kContext, 2, metrics);
  auto a = job(kPrompt, 10);
  svc.run(*a);
  REQUIRE_FALSE(a->error);
  const std::string full = a->result.text;
  REQUIRE(full.size() >= 6);

  // A stop string from the middle of the reply ends it there (the text before it kept).
  const std::string stop = full.substr(3, 3);
  auto b = job(kPrompt, 10);
  b->req.stop_strings = {stop};
  svc.run(*b);
  REQUIRE_FALSE(b->error);
  CHECK(b->result.finish == FinishReason::stop);
  CHECK(b->result.text == full.substr(0, full.find(stop)));
  CHECK(b->pipo_report["stop_reason"] == "stop");
  // Its raw length counts the kept tokens, and the next turn (the kept reply, then more)
  // continues its latents (regression: the cut tokens stayed in them, so the whole
  // conversation was re-prefilled, silently).
  const std::vector<int32_t> kept(b->result.tokens.begin(), b->result.tokens.end());
  CHECK(b->pipo_report["raw_length"] == static_cast<long>(kPrompt.size() + kept.size()));
  std::vector<int32_t> next = kPrompt;
  next.insert(next.end(), kept.begin(), kept.end());
  next.insert(next.end(), {42, 43, 44});
  auto b2 = job(next, 4);
  svc.run(*b2);
  REQUIRE_FALSE(b2->error);
  CHECK(b2->pipo_report["continued_from_latents"] == true);
  CHECK(b2->pipo_report["reused_pairs"].get<long>() >= 6);

  auto z = job(kPrompt, 0);
  svc.run(*z);
  REQUIRE_FALSE(z->error);
  CHECK(z->result.tokens.empty());
  CHECK(z->result.finish == FinishReason::length);

  auto gone = job(kPrompt, 10);
  gone->cancel = true;  // the client went away
  svc.run(*gone);
  REQUIRE_FALSE(gone->error);
  CHECK(gone->result.finish == FinishReason::cancelled);
  CHECK(gone->result.tokens.size() < 10);
  CHECK(gone->pipo_report["stop_reason"] == "cancelled");

  auto late = job(kPrompt, 10);
  late->deadline = Clock::now() - std::chrono::seconds(1);
  svc.run(*late);
  REQUIRE_FALSE(late->error);
  CHECK(late->timed_out);
  CHECK(late->result.finish == FinishReason::cancelled);
}

TEST_CASE("pipo service: a prompt past the context is a 400 and the service goes on", "[model][serve][pipo]") {
  Served s;
  ServeMetrics metrics;
  PipoService svc(s.load(), 0.3, kContext, 2, metrics);
  auto big = job(std::vector<int32_t>(kContext + 10, 523), 4);
  svc.run(*big);
  REQUIRE(big->done);
  REQUIRE(big->error);
  CHECK(big->error->status == 400);
  CHECK(big->error->code == "context_length_exceeded");
  auto ok = job(kPrompt, 4);
  svc.run(*ok);
  CHECK_FALSE(ok->error);
  CHECK(ok->result.tokens.size() == 4);
  CHECK(sample(metrics.render(), "specchat:pipo_requests_total") == 1);  // the refused one not counted
}

TEST_CASE("pipo service: the queue is bounded and stop() answers what waits", "[model][serve][pipo]") {
  Served s;
  ServeMetrics metrics;
  PipoService svc(s.load(), 0.3, kContext, 1, metrics);  // not started: jobs stay queued
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(job(kPrompt, 4));
  CHECK(svc.submit(jobs[0]));  // the idle unit's own slot
  CHECK(svc.submit(jobs[1]));  // the one queue place
  CHECK_FALSE(svc.submit(jobs[2]));
  CHECK(svc.queued() == 2);
  CHECK(sample(metrics.render(), "specchat:pipo_requests_deferred") == 2);
  svc.stop();
  for (int i = 0; i < 2; ++i) {
    REQUIRE(jobs[static_cast<size_t>(i)]->done);
    REQUIRE(jobs[static_cast<size_t>(i)]->error);
    CHECK(jobs[static_cast<size_t>(i)]->error->status == 503);
    CHECK(jobs[static_cast<size_t>(i)]->error->code == "shutting_down");
  }
  CHECK_FALSE(svc.submit(job(kPrompt, 4)));
}

TEST_CASE("pipo service: a started worker answers queued jobs one at a time", "[model][serve][pipo]") {
  Served s;
  ServeMetrics metrics;
  PipoService svc(s.load(), 0.3, kContext, 4, metrics);
  svc.start();
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(job(kPrompt, 6));
    REQUIRE(svc.submit(jobs.back()));
  }
  for (auto& j : jobs) {
    std::unique_lock<std::mutex> l(j->m);
    REQUIRE(j->cv.wait_for(l, std::chrono::seconds(60), [&] { return j->done; }));
    CHECK_FALSE(j->error);
    CHECK(j->result.tokens.size() == 6);
  }
  // Greedy: the same prompt gives the same reply each time.
  CHECK(jobs[1]->result.tokens == jobs[0]->result.tokens);
  CHECK(jobs[2]->result.tokens == jobs[0]->result.tokens);
  svc.stop();
  CHECK(sample(metrics.render(), "specchat:pipo_requests_total") == 3);
  CHECK(sample(metrics.render(), "specchat:pipo_requests_processing") == 0);
}

TEST_CASE("pipo service: a threshold outside [0, 1] is refused", "[model][serve][pipo]") {
  Served s;
  ServeMetrics metrics;
  CHECK_THROWS_AS(PipoService(s.load(), 1.5, kContext, 1, metrics), PipoError);
  CHECK_THROWS_AS(PipoService(s.load(), 0.5, 0, 1, metrics), std::invalid_argument);
}

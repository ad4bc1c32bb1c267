// serve::Scheduler with the bundled pair: how the draft-length policy meets admission.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>

#include "app/serve/metrics.h"
#include "app/serve/scheduler.h"
#include "engine/model_fixture.h"

using namespace specchat;
using namespace specchat::serve;

// Regression: a burst of requests was admitted with the draft cap of the step before (no cap
// while the server was idle), so each one prefilled the draft model although the batch they
// made turned drafting off at once (DraftLengthPolicy: off from 4 active). The cap for the batch
// being formed is now set before the admissions' prefill.
TEST_CASE("scheduler: a burst admitted into a batch that will not draft skips the draft prefill", "[model][serve]") {
  REQUIRE(test::bundled_models_present());
  PairOptions o;
  o.target_path = test::target_model();
  o.draft_path = test::draft_model();
  o.n_seq = 4;
  ModelPair pair = ModelPair::load(o);
  ServeMetrics metrics;
  Scheduler sched(pair, 4, 8, 0, metrics);
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 4; ++i) {
    auto j = std::make_shared<Job>();
    j->id = static_cast<uint64_t>(i + 1);
    j->req.prompt = pair.encode_prompt("Once upon a time there was a little dog named Max. He");
    j->req.max_tokens = 8;  // the same length: all four finish in the same step
    j->spec.drafter = DrafterChoice::model;
    j->spec.draft_k = 3;
    j->arrived = Clock::now();
    j->deadline = j->arrived + std::chrono::seconds(120);
    REQUIRE(sched.submit(j));  // queued before the scheduler runs: one burst
    jobs.push_back(j);
  }
  sched.start();
  for (const auto& j : jobs) {
    std::unique_lock<std::mutex> l(j->m);
    REQUIRE(j->cv.wait_for(l, std::chrono::seconds(120), [&] { return j->done; }));
  }
  sched.stop();
  for (int i = 0; i < 4; ++i) {
    const Job& j = *jobs[static_cast<size_t>(i)];
    INFO("job " << i);
    REQUIRE_FALSE(j.error);
    CHECK(j.result.tokens.size() == 8);
    CHECK(j.result.stats.n_drafted == 0);        // 4 active: drafting off from the first step
    CHECK(pair.draft->kv(i).size() == 0);         // and the draft model never prefilled
  }
}

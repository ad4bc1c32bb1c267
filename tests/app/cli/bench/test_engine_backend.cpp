// The runner's backend over a loaded pair (app/cli/bench/engine_backend.h), its PIPO side: the
// fidelity gauge's time that a request waited for, and the acceptance counts of a PIPO reply.
#include <catch2/catch.hpp>

#include <algorithm>

#include "app/cli/bench/configs.h"
#include "app/cli/bench/engine_backend.h"
#include "engine/model.h"
#include "engine/pipo/pipo_release.h"
#include "test_paths.h"

using namespace specchat;
using namespace specchat::bench;

TEST_CASE("engine backend: a PIPO request's gauge time includes the wave's earlier requests'", "[model][pipo][bench]") {
  // Regression (found by the helper): PIPO requests of a wave run one after another, so the
  // second one waited for the first one's fidelity gauge too, which stayed in its TTFT.
  PairOptions po;
  po.target_path = test::target_model();
  po.n_threads = 1;
  ModelPair pair = ModelPair::load(po);
  EngineBackend be(pair, 1);
  PipoLoadOptions lo;
  lo.backbone.n_threads = 1;
  lo.plain_target = pair.target->path();
  PipoUnit unit = load_pipo_release(test::models_dir() + "/pipo", lo);
  be.set_pipo(&unit);
  LlamaModel::Options mo;
  mo.n_threads = 1;
  std::unique_ptr<LlamaModel> plain = LlamaModel::load(pair.target->path(), mo);
  be.set_pipo_fidelity(plain.get(), 1);
  const BenchConfig cfg = parse_configs("baseline,pipo:t=0.5").at(1);
  REQUIRE(cfg.approximate());

  std::vector<ApproxMonitor> mons;
  std::vector<GenerationResult> results;
  const auto run = [&](const std::string& text) {
    BenchPrompt p;
    p.id = text;
    p.turns = {text};
    GenerateRequest req;
    req.prompt = be.encode(p, "chat");
    req.max_tokens = 48;
    const int64_t id = be.submit_config(cfg, p, req, {});
    REQUIRE(be.finished(id));
    results.push_back(be.take(id));
    mons.push_back(be.take_monitor(id));
  };
  be.clear_cache();
  run("Tell me a story about a cat.");
  run("Say hi.");
  be.clear_cache();  // a new wave
  run("What is two plus two?");
  for (size_t i = 0; i < mons.size(); ++i) {
    INFO("request " << i);
    CHECK(mons[i].samples == results[i].stats.n_steps);  // 1 step in 1
    CHECK(mons[i].total_ms > 0);
    CHECK(mons[i].before_first_ms <= mons[i].total_ms);
    // accepted = the head's tokens emitted: the drafted flags of the reply.
    const long flagged = std::count(results[i].drafted.begin(), results[i].drafted.end(), uint8_t{1});
    CHECK(results[i].stats.n_accepted == flagged);
    CHECK(results[i].stats.n_drafted + results[i].stats.n_empty_drafts == results[i].stats.n_steps);
  }
  // The second request waited for the first one's gauge.
  CHECK(mons[1].before_first_ms >= mons[0].total_ms);
  CHECK(mons[1].total_ms > mons[0].total_ms);
}

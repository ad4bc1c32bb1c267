// `specchat-cli bench --concurrency N`: aggregate decode throughput of N sequences stepped
// together by one Engine against the same prompts one at a time.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/bench.h"
#include "app/cli/report.h"
#include "app/cli/data_files.h"
#include "engine/model_pair.h"
#include "engine/runtime/engine.h"

namespace specchat::cli {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

struct Tally {
  long tokens = 0;
  double decode_s = 0;  // wall time of the decode steps (prefill excluded)
  long identical = 0, runs = 0;
  long steps = 0, seq_steps = 0;  // engine steps, and the active sequences summed over them
  double tps() const { return decode_s > 0 ? tokens / decode_s : 0; }
  // Sequences per step on average: below N while the queue's last requests finish alone.
  double occupancy() const { return steps > 0 ? static_cast<double>(seq_steps) / steps : 0; }
};

// Decodes `reqs` with at most `max_active` sequences at once: continuous batching, a finished
// sequence's slot goes to the next queued request between steps. Prefill happens inside
// submit(); its time is excluded, so `t.decode_s` is the wall time of the decode steps only.
// Returns the results in request order.
std::vector<GenerationResult> run_queue(Engine& e, const std::vector<GenerateRequest>& reqs, int max_active, Tally& t) {
  e.clear_cache();
  std::vector<GenerationResult> out(reqs.size());
  std::vector<std::pair<Engine::SeqId, size_t>> active;
  size_t next = 0;
  double prefill_s = 0;
  const auto t0 = Clock::now();
  while (next < reqs.size() || !active.empty()) {
    while (next < reqs.size() && static_cast<int>(active.size()) < max_active) {
      const auto p0 = Clock::now();
      active.emplace_back(e.submit(reqs[next]), next);
      prefill_s += std::chrono::duration<double>(Clock::now() - p0).count();
      ++next;
    }
    ++t.steps;
    t.seq_steps += static_cast<long>(active.size());
    e.step();
    for (size_t i = 0; i < active.size();) {
      if (e.finished(active[i].first)) {
        out[active[i].second] = e.take(active[i].first);
        t.tokens += out[active[i].second].stats.n_generated;
        active.erase(active.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
  }
  t.decode_s += std::chrono::duration<double>(Clock::now() - t0).count() - prefill_s;
  return out;
}

}  // namespace

int cmd_bench_concurrency(BenchOptions& o) {
  CommonOptions& c = o.common;
  const int n_conc = o.concurrency;
  PairOptions po;
  po.target_path = c.model;
  apply_draft(c, true, po);  // --draft, the bundled draft, or one found beside --model
  po.n_threads = c.threads;
  po.kv_type = parse_kv_type(c.kv_type);
  po.activations = parse_activations(c.activations);
  po.n_seq = n_conc;
  ModelPair pair = ModelPair::load(po);
  const std::string prompts_path =
      o.prompts.empty() ? bundled_data_file("heldout_prompts.json") : o.prompts;
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& [kind, text] : load_bench_prompts(prompts_path, o.max_prompts)) {
    auto ids = kind == "chat" ? pair.encode_chat({{"user", text}}) : pair.encode_prompt(text);
    if (static_cast<int>(ids.size()) + c.n + 64 < pair.target->n_ctx()) prompts.push_back(std::move(ids));
  }
  if (prompts.size() < static_cast<size_t>(n_conc)) {
    throw std::runtime_error("bench --concurrency " + std::to_string(n_conc) + " needs at least that many prompts (" +
                             std::to_string(prompts.size()) + " fit)");
  }
  Engine e(*pair.target, pair.draft.get());
  std::vector<int> ks = {0};
  for (int k : o.chain_ks) ks.push_back(k);
  json rows = json::array();
  bool all_identical = true;
  std::printf("%-12s %12s %12s %8s %9s %10s\n", "config", "1 seq tok/s", "N seq tok/s", "ratio", "identical",
              "seqs/step");
  for (int k : ks) {
    Tally one, many;
    std::vector<GenerateRequest> reqs;
    for (const auto& p : prompts) reqs.push_back(make_request(c, p, k));
    // The queue with N active, then with 1 active, then N again and 1 again (interleaved, so
    // machine noise hits both alike).
    for (int round = 0; round < 2; ++round) {
      const auto together = run_queue(e, reqs, n_conc, many);
      const auto alone = run_queue(e, reqs, 1, one);
      for (size_t i = 0; i < reqs.size(); ++i) {
        const bool same = alone[i].tokens == together[i].tokens;
        ++many.runs;
        many.identical += same ? 1 : 0;
        if (c.temp <= 0 && !same) all_identical = false;
      }
      std::fprintf(stderr, "\r%s: round %d", k == 0 ? "baseline" : ("chain k=" + std::to_string(k)).c_str(), round + 1);
    }
    std::fprintf(stderr, "\n");
    const std::string name = k == 0 ? "baseline" : "chain k=" + std::to_string(k);
    const double ratio = one.tps() > 0 ? many.tps() / one.tps() : 0;
    std::printf("%-12s %12.1f %12.1f %7.2fx %5ld/%ld %10.2f\n", name.c_str(), one.tps(), many.tps(), ratio,
                many.identical, many.runs, many.occupancy());
    rows.push_back({{"config", name}, {"draft_k", k}, {"concurrency", n_conc}, {"tokens_per_s_1", one.tps()},
                    {"tokens_per_s_n", many.tps()}, {"ratio", ratio}, {"tokens", many.tokens},
                    {"identical", many.identical}, {"runs", many.runs},
                    {"sequences_per_step", many.occupancy()}});
  }
  if (!o.out.empty()) {
    write_report_json(o.out, json{{"prompts", prompts.size()}, {"n", c.n}, {"concurrency", n_conc}, {"temperature", c.temp},
                                  {"kv_type", c.kv_type}, {"activations", c.activations}, {"rows", rows}});
  }
  return all_identical ? 0 : 1;
}

}  // namespace specchat::cli

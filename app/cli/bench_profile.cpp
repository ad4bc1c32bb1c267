// `specchat-cli bench --profile`: where the time of decoding goes, per operation (issue 10 §5).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/bench.h"
#include "app/cli/report.h"
#include "app/cli/data_files.h"
#include "engine/model.h"
#include "engine/model_pair.h"
#include "engine/op_profile.h"
#include "engine/runtime/engine.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/thread_pool.h"

namespace specchat::cli {

using nlohmann::json;

namespace {

struct ModeProfile {
  std::string name;
  OpProfile target, draft;
  GenerationStats sum;  // decode_ms, draft_ms, verify_ms, sample_ms, tokens, steps, drafted, accepted
};

void add_stats(GenerationStats& a, const GenerationStats& b) {
  a.n_generated += b.n_generated;
  a.n_steps += b.n_steps;
  a.n_drafted += b.n_drafted;
  a.n_accepted += b.n_accepted;
  a.decode_ms += b.decode_ms;
  a.draft_ms += b.draft_ms;
  a.verify_ms += b.verify_ms;
  a.sample_ms += b.sample_ms;
}

// Prints one mode's table and returns it as JSON.
json print_mode(const ModeProfile& m) {
  const GenerationStats& s = m.sum;
  const double total = s.decode_ms;
  const double ops = m.target.total_ms();
  std::printf("\n%s: %d tokens in %d steps (%.2f target rows per forward, tau %.2f), %.1f ms decoding, %.1f tokens/s\n",
              m.name.c_str(), s.n_generated, s.n_steps,
              m.target.forwards ? static_cast<double>(m.target.rows) / static_cast<double>(m.target.forwards) : 0.0,
              s.n_steps ? static_cast<double>(s.n_generated) / s.n_steps : 0.0, total,
              total > 0 ? s.n_generated * 1000.0 / total : 0.0);
  std::printf("  %-46s %10s %7s %8s %10s\n", "operation", "ms", "%", "calls", "us/call");
  std::vector<const OpProfile::Entry*> rows;
  for (const OpProfile::Entry& e : m.target.ops) {
    if (e.calls > 0) rows.push_back(&e);
  }
  std::sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) { return a->ms > b->ms; });
  json j = {{"mode", m.name},           {"tokens", s.n_generated}, {"steps", s.n_steps},
            {"decode_ms", total},       {"drafted", s.n_drafted},  {"accepted", s.n_accepted},
            {"target_forwards", m.target.forwards}, {"target_rows", m.target.rows}};
  json jo = json::array();
  auto line = [&](const std::string& name, double ms, long calls) {
    const double pct = total > 0 ? 100.0 * ms / total : 0.0;
    if (calls > 0) {
      std::printf("  %-46s %10.2f %6.1f%% %8ld %10.2f\n", name.c_str(), ms, pct, calls, 1000.0 * ms / calls);
    } else {
      std::printf("  %-46s %10.2f %6.1f%%\n", name.c_str(), ms, pct);
    }
    jo.push_back({{"op", name}, {"ms", ms}, {"share", total > 0 ? ms / total : 0.0}, {"calls", calls}});
  };
  for (const auto* e : rows) line("target: " + e->name, e->ms, e->calls);
  // The rest of the verification step: batch and mask building, K/V bookkeeping around the ops.
  line("target: forward glue (outside the ops)", std::max(0.0, s.verify_ms - ops), 0);
  if (m.draft.forwards > 0 || s.draft_ms > 0) {
    line("draft model forwards (" + std::to_string(m.draft.forwards) + ", all ops)", m.draft.total_ms(), 0);
    // Their split, indented: a part of the line above (kept out of "ops", whose shares sum to 1).
    std::vector<const OpProfile::Entry*> drows;
    for (const OpProfile::Entry& e : m.draft.ops) {
      if (e.calls > 0) drows.push_back(&e);
    }
    std::sort(drows.begin(), drows.end(), [](const auto* a, const auto* b) { return a->ms > b->ms; });
    json jd = json::array();
    for (const auto* e : drows) {
      std::printf("    %-44s %10.2f %6.1f%% %8ld %10.2f\n", ("draft: " + e->name).c_str(), e->ms,
                  total > 0 ? 100.0 * e->ms / total : 0.0, e->calls, 1000.0 * e->ms / e->calls);
      jd.push_back({{"op", "draft: " + e->name}, {"ms", e->ms}, {"share", total > 0 ? e->ms / total : 0.0},
                    {"calls", e->calls}});
    }
    j["draft_ops"] = jd;
    line("drafting: tree building and draft sampling", std::max(0.0, s.draft_ms - m.draft.total_ms()), 0);
  }
  line("sampling and acceptance", s.sample_ms, 0);
  line("engine overhead (KV commit, emit, stats)", std::max(0.0, total - s.draft_ms - s.verify_ms - s.sample_ms), 0);
  j["ops"] = jo;
  return j;
}

}  // namespace

int cmd_bench_profile(BenchOptions& o) {
  CommonOptions& c = o.common;
  PairOptions po;
  po.target_path = c.model;
  apply_draft(c, true, po);
  po.n_threads = c.threads;
  po.kv_type = parse_kv_type(c.kv_type);
  po.activations = parse_activations(c.activations);
  ModelPair pair = ModelPair::load(po);
  if (!pair.target->set_profile(nullptr)) {
    throw std::runtime_error("bench --profile: the " + pair.target->device_name() +
                             " backend cannot be profiled per operation");
  }
  const std::string prompts_path = o.prompts.empty() ? bundled_data_file("heldout_prompts.json") : o.prompts;
  const auto prompts = load_bench_prompts(prompts_path, std::min(o.max_prompts, 12));
  if (prompts.empty()) throw std::runtime_error("bench --profile: no prompts in " + prompts_path);
  Engine engine(*pair.target, pair.draft.get());
  std::vector<ModeProfile> modes(pair.draft ? 2 : 1);
  modes[0].name = "decode (baseline: one target row per step)";
  if (pair.draft) modes[1].name = "verification (draft-model chain k=" + std::to_string(o.profile_k) + ")";
  for (size_t mi = 0; mi < modes.size(); ++mi) {
    ModeProfile& m = modes[mi];
    CommonOptions oc = c;
    oc.tree = "chain";
    oc.drafter = mi == 0 ? "none" : "model";
    oc.node_budget = oc.depth = o.profile_k;
    for (int warm = 1; warm >= 0; --warm) {  // one untimed pass over the first prompt, then all
      for (size_t i = 0; i < (warm ? 1 : prompts.size()); ++i) {
        const auto& [kind, text] = prompts[i];
        const std::vector<int32_t> ids = kind == "chat" ? pair.encode_chat({{"user", text}}) : pair.encode_prompt(text);
        engine.clear_cache();
        const Engine::SeqId id = engine.submit(make_request(oc, ids, mi == 0 ? 0 : o.profile_k));  // prefill: not profiled
        if (!warm) {
          pair.target->set_profile(&m.target);
          if (pair.draft) pair.draft->set_profile(&m.draft);
        }
        engine.run_until_finished(id);
        pair.target->set_profile(nullptr);
        if (pair.draft) pair.draft->set_profile(nullptr);
        const GenerationResult r = engine.take(id);
        if (!warm) add_stats(m.sum, r.stats);
      }
    }
  }
  const auto pool = pair.target->cpu_pool();
  std::printf("target %s, draft %s; kernel %s; %zu prompts, -n %d, %d threads; times are wall ms of the engine "
              "thread, %% of decoding time\n",
              pair.target->path().c_str(), pair.draft ? pair.draft->path().c_str() : "none", cpu::linear_isa(),
              prompts.size(), c.n, pool ? pool->n_threads() : 1);
  if (!pair.draft) std::printf("no draft model (--draft none or ngram): verification of a draft chain is not profiled\n");
  json out = json::array();
  for (const ModeProfile& m : modes) out.push_back(print_mode(m));
  if (!o.out.empty()) {
    write_report_json(o.out, json{{"target", pair.target->path()}, {"kernel", cpu::linear_isa()}, {"prompts", prompts.size()},
                                  {"max_tokens", c.n}, {"modes", out}});
  }
  return 0;
}

}  // namespace specchat::cli

#include "app/cli/report.h"

#include <fstream>
#include <stdexcept>

#include <algorithm>
#include <cstdio>

namespace specchat::cli {

nlohmann::json result_json(const GenerationResult& r, const std::vector<int32_t>& prompt,
                           const GenerateRequest& req, const std::string& mode) {
  const GenerationStats& s = r.stats;
  const TreeBudget b = req.spec.effective_budget();
  nlohmann::json j;
  j["mode"] = mode;
  j["draft_k"] = req.spec.draft_k;
  j["drafter"] = req.spec.draft_k > 0 ? drafter_kind_name(req.spec.drafter) : "none";
  j["tree"] = tree_mode_name(b.mode);
  j["node_budget"] = req.spec.draft_k > 0 ? b.node_budget : 0;
  j["depth"] = req.spec.draft_k > 0 ? b.depth : 0;
  j["branch"] = b.branch;
  j["prompt_tokens"] = prompt;
  j["n_prompt"] = s.n_prompt;
  j["n_prompt_cached"] = s.n_prompt_cached;
  j["tokens"] = r.tokens;
  j["drafted_flags"] = r.drafted;
  j["text"] = r.text;
  j["n_tokens"] = s.n_generated;
  j["n_generated"] = s.n_generated;
  j["finish_reason"] = finish_reason_name(r.finish);
  j["tokens_per_s"] = s.tokens_per_s();
  j["ttft_ms"] = s.ttft_ms;
  j["tpot_ms"] = s.tpot_ms();
  j["prefill_ms"] = s.prefill_ms;
  j["decode_ms"] = s.decode_ms;
  j["draft_ms"] = s.draft_ms;
  j["verify_ms"] = s.verify_ms;
  j["sample_ms"] = s.sample_ms;
  j["drafted"] = s.n_drafted;
  j["accepted"] = s.n_accepted;
  j["n_drafted"] = s.n_drafted;
  j["n_accepted"] = s.n_accepted;
  j["n_steps"] = s.n_steps;
  j["n_target_tokens"] = std::max(s.n_target_tokens, s.n_generated);  // τ's numerator: + a final EOS
  j["n_empty_drafts"] = s.n_empty_drafts;
  j["n_backoff_steps"] = s.n_backoff_steps;
  j["acceptance_rate"] = s.acceptance_rate();
  j["mean_accepted_length"] = s.mean_accepted_length();
  j["accepted_hist"] = s.accepted_hist;
  return j;
}

std::string stats_line(const GenerationStats& s, const SpecConfig& spec) {
  char shape[160];
  const TreeBudget b = spec.effective_budget();
  if (spec.draft_k <= 0) {
    std::snprintf(shape, sizeof shape, "plain decoding");
  } else if (b.mode == TreeMode::chain) {
    std::snprintf(shape, sizeof shape, "%s drafter, chain k = %d", drafter_kind_name(spec.drafter), spec.draft_k);
  } else if (b.mode == TreeMode::dynamic) {
    std::snprintf(shape, sizeof shape, "%s drafter, dynamic tree of %d nodes, depth %d, branch %d",
                  drafter_kind_name(spec.drafter), b.node_budget, b.depth, b.branch);
  } else {
    std::snprintf(shape, sizeof shape, "%s drafter, optimal tree of %d nodes, depth %d",
                  drafter_kind_name(spec.drafter), b.node_budget, b.depth);
  }
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "%d tokens, %.1f tokens/s, TTFT %.1f ms, TPOT %.2f ms, drafted %d, accepted %d, "
                "α %.3f, τ %.2f (%s, %d step%s)",
                s.n_generated, s.tokens_per_s(), s.ttft_ms, s.tpot_ms(), s.n_drafted, s.n_accepted,
                s.acceptance_rate(), s.mean_accepted_length(), shape, s.n_steps, s.n_steps == 1 ? "" : "s");
  return buf;
}

namespace {
nlohmann::json model_memory_json(const LlamaModel& m) {
  const MemoryInfo mi = m.memory();
  return {{"backend", backend_name(m.backend_kind())},
          {"device", m.device_name()},
          {"weights_bytes", mi.weights_bytes},
          {"kv_bytes", mi.kv_bytes},
          {"kv_type", dtype_name(mi.kv_type)},
          {"q8_activations", mi.q8_activations},
          {"activation_bytes", mi.activation_bytes},
          {"packed_bytes", mi.packed_bytes},
          {"device_used_bytes", mi.device_used_bytes},
          {"device_total_bytes", mi.device_total_bytes}};
}
}  // namespace

nlohmann::json memory_json(const LlamaModel& target, const LlamaModel* draft) {
  nlohmann::json j = model_memory_json(target);
  if (draft) j["draft"] = model_memory_json(*draft);
  return j;
}

void write_report_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write the report to " + path);
  out << j.dump(1) << "\n";
  out.close();
  if (!out) throw std::runtime_error("cannot write the report to " + path + ": the write failed (disk full?)");
}

}  // namespace specchat::cli

#include "app/cli/bench/records.h"

#include <cstdio>

namespace specchat::bench {

using nlohmann::json;

json record_json(const RequestRecord& r) {
  return {{"prompt_id", r.prompt_id}, {"category", r.category}, {"tier", r.tier}, {"bucket", r.bucket},
          {"config", r.config}, {"concurrency", r.concurrency}, {"repeat", r.repeat}, {"wave", r.wave},
          {"input_tokens", r.input_tokens}, {"max_tokens", r.max_tokens}, {"output_tokens", r.output_tokens},
          {"steps", r.steps}, {"target_tokens", r.target_tokens}, {"drafted", r.drafted}, {"accepted", r.accepted}, {"empty_drafts", r.empty_drafts},
          {"ttft_ms", r.ttft_ms}, {"latency_ms", r.latency_ms}, {"tpot_ms", r.tpot_ms},
          {"accept_lengths", r.accept_lengths}, {"accepted_at", r.accepted_at}, {"draft_steps", r.draft_steps},
          {"output_hash", r.output_hash}, {"identical", r.identical}, {"first_diff", r.first_diff},
          {"approximate", r.approximate}, {"fidelity_samples", r.fidelity_samples},
          {"fidelity_kl_sum", r.fidelity_kl_sum}, {"fidelity_kl_max", r.fidelity_kl_max},
          {"error", r.error}};
}

RequestRecord record_from_json(const json& j) {
  RequestRecord r;
  r.prompt_id = j.at("prompt_id");
  r.category = j.at("category");
  r.tier = j.at("tier");
  r.bucket = j.at("bucket");
  r.config = j.at("config");
  r.concurrency = j.at("concurrency");
  r.repeat = j.at("repeat");
  r.wave = j.at("wave");
  r.input_tokens = j.at("input_tokens");
  r.max_tokens = j.at("max_tokens");
  r.output_tokens = j.at("output_tokens");
  r.steps = j.at("steps");
  r.target_tokens = j.value("target_tokens", 0);  // absent in reports written before it existed
  r.drafted = j.at("drafted");
  r.accepted = j.at("accepted");
  r.empty_drafts = j.at("empty_drafts");
  r.ttft_ms = j.at("ttft_ms");
  r.latency_ms = j.at("latency_ms");
  r.tpot_ms = j.at("tpot_ms");
  r.accept_lengths = j.at("accept_lengths").get<std::vector<int>>();
  r.accepted_at = j.at("accepted_at").get<std::vector<int>>();
  r.draft_steps = j.at("draft_steps");
  r.output_hash = j.at("output_hash");
  r.identical = j.at("identical");
  r.approximate = j.value("approximate", false);
  r.fidelity_samples = j.value("fidelity_samples", 0);  // absent before the bench's fidelity gauge
  r.fidelity_kl_sum = j.value("fidelity_kl_sum", 0.0);
  r.fidelity_kl_max = j.value("fidelity_kl_max", 0.0);
  r.first_diff = j.at("first_diff");
  r.error = j.at("error");
  return r;
}

json wave_json(const WaveRecord& w) {
  return {{"config", w.config}, {"concurrency", w.concurrency}, {"repeat", w.repeat}, {"wave", w.wave},
          {"requests", w.requests}, {"output_tokens", w.output_tokens}, {"wall_ms", w.wall_ms}};
}

WaveRecord wave_from_json(const json& j) {
  WaveRecord w;
  w.config = j.at("config");
  w.concurrency = j.at("concurrency");
  w.repeat = j.at("repeat");
  w.wave = j.at("wave");
  w.requests = j.at("requests");
  w.output_tokens = j.at("output_tokens");
  w.wall_ms = j.at("wall_ms");
  return w;
}

json meta_json(const RunMeta& m) {
  return {{"date_utc", m.date_utc}, {"git_commit", m.git_commit}, {"cpu_model", m.cpu_model},
          {"cpu_cores", m.cpu_cores}, {"gpu", m.gpu}, {"backend", m.backend}, {"target_model", m.target_model},
          {"target_sha256", m.target_sha256}, {"draft_model", m.draft_model}, {"draft_sha256", m.draft_sha256},
          {"suite_name", m.suite_name}, {"suite_path", m.suite_path}, {"settings", m.settings},
          {"truncated", m.truncated}};
}

RunMeta meta_from_json(const json& j) {
  RunMeta m;
  m.date_utc = j.at("date_utc");
  m.git_commit = j.at("git_commit");
  m.cpu_model = j.at("cpu_model");
  m.cpu_cores = j.at("cpu_cores");
  m.gpu = j.at("gpu");
  m.backend = j.at("backend");
  m.target_model = j.at("target_model");
  m.target_sha256 = j.at("target_sha256");
  m.draft_model = j.at("draft_model");
  m.draft_sha256 = j.at("draft_sha256");
  m.suite_name = j.at("suite_name");
  m.suite_path = j.at("suite_path");
  m.settings = j.at("settings");
  m.truncated = j.at("truncated");
  return m;
}

std::vector<int> accept_lengths_from_flags(const std::vector<uint8_t>& drafted, DraftOrder order) {
  std::vector<int> out;
  if (order == DraftOrder::token_then_draft) {  // a 0 opens each step
    for (uint8_t d : drafted) {
      if (!d || out.empty()) out.push_back(0);
      if (d) ++out.back();
    }
    return out;
  }
  int run = 0;
  for (uint8_t d : drafted) {
    if (d) {
      ++run;
    } else {
      out.push_back(run);
      run = 0;
    }
  }
  if (run > 0) out.push_back(run);  // the last step was cut by max_tokens or a stop
  return out;
}

std::string token_hash(const std::vector<int32_t>& ids) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t id : ids) {
    for (int b = 0; b < 4; ++b) {
      h ^= (static_cast<uint32_t>(id) >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace specchat::bench

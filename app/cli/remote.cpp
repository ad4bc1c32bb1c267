#include "app/cli/remote.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace specchat::cli {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string endpoint_api_key(const CommonOptions& o) {
  if (!o.api_key.empty()) return o.api_key;
  const char* k = std::getenv("SPECCHAT_API_KEY");
  return k ? k : "";
}

remote::RemoteRequest remote_request(const CommonOptions& o, int draft_k) {
  remote::RemoteRequest r;
  r.endpoint = o.endpoint;
  r.api_key = endpoint_api_key(o);
  r.model = o.model_name;
  r.chat = o.chat_given;
  r.messages = o.messages;
  if (r.chat && r.messages.empty()) {
    if (!o.system.empty()) r.messages.push_back({"system", o.system});
    r.messages.push_back({"user", o.chat});
  }
  r.prompt = o.prompt;
  r.max_tokens = o.n;
  r.temperature = o.temp;
  r.top_p = o.top_p;
  r.top_k = o.top_k;
  r.seed = o.seed;
  r.stop = o.stop;
  r.speculative = draft_k > 0;
  if (r.speculative && o.remote_spec.is_object()) r.extra = o.remote_spec;
  return r;
}

RemoteResult remote_generate(const CommonOptions& o, int draft_k, const std::function<void(const std::string&)>& on_text) {
  return remote::remote_generate(remote_request(o, draft_k), on_text);
}

namespace {
json remote_json(const CommonOptions& o, const RemoteResult& r) {
  const double alpha = r.n_drafted > 0 ? static_cast<double>(r.n_accepted) / static_cast<double>(r.n_drafted) : 0;
  return json{{"mode", "remote"},
              {"endpoint", o.endpoint},
              {"text", r.text},
              {"finish_reason", r.finish_reason},
              {"n_prompt", r.n_prompt},
              {"n_generated", r.n_generated},
              {"ttft_ms", r.ttft_ms},
              {"total_ms", r.total_ms},
              {"spec_stats_source", r.spec_source.empty() ? json(nullptr) : json(r.spec_source)},
              {"drafted", r.n_drafted},
              {"accepted", r.n_accepted},
              {"acceptance_rate", alpha},
              {"usage", r.usage},
              {"timings", r.timings}};
}
}  // namespace

int cmd_generate_remote(const CommonOptions& o) {
  const RemoteResult r = remote_generate(o, o.drafter == "none" ? 0 : o.draft_k, [&](const std::string& piece) {
    if (o.json) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  const double alpha = r.n_drafted > 0 ? static_cast<double>(r.n_accepted) / static_cast<double>(r.n_drafted) : 0;
  if (o.json) {
    json j = remote_json(o, r);
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::printf("\n\n%ld tokens from %s, TTFT %.1f ms, total %.1f ms", r.n_generated, o.endpoint.c_str(), r.ttft_ms,
              r.total_ms);
  if (!r.spec_source.empty()) {
    std::printf(", drafted %ld, accepted %ld, α %.3f (%s)", r.n_drafted, r.n_accepted, alpha,
                r.spec_source == "timings" ? "server timings" : "vLLM /metrics counters");
  } else {
    std::printf(", no speculative statistics reported");
  }
  std::printf("\n");
  return 0;
}


int cmd_compare_remote(const CommonOptions& o) {
  CommonOptions base_o = o, spec_o = o;
  base_o.endpoint = o.baseline_endpoint.empty() ? o.endpoint : o.baseline_endpoint;
  spec_o.endpoint = o.endpoint.empty() ? o.baseline_endpoint : o.endpoint;
  auto quiet = [](const std::string&) {};
  const RemoteResult base = remote_generate(base_o, 0, quiet);
  const RemoteResult spec = remote_generate(spec_o, o.drafter == "none" ? 0 : o.draft_k, quiet);
  const bool identical = base.text == spec.text;
  auto tps = [](const RemoteResult& r) {
    return r.timings.is_object() && r.timings.contains("predicted_per_second") && r.timings["predicted_per_second"].is_number()
               ? r.timings["predicted_per_second"].get<double>()
               : 0.0;
  };
  const double speedup = tps(base) > 0 && tps(spec) > 0 ? tps(spec) / tps(base) : 0;
  const double total_ratio = spec.total_ms > 0 ? base.total_ms / spec.total_ms : 0;
  if (o.json) {
    json j{{"baseline", remote_json(base_o, base)},
           {"speculative", remote_json(spec_o, spec)},
           {"identical", identical},
           {"speedup_decode", speedup > 0 ? json(speedup) : json(nullptr)},
           {"total_time_ratio", total_ratio}};
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::cout << "=== baseline (" << base_o.endpoint << ") ===\n" << base.text << "\n\n";
  std::cout << "=== speculative (" << spec_o.endpoint << ") ===\n" << spec.text << "\n";
  if (!spec.spec_source.empty()) {
    std::printf("drafted %ld, accepted %ld (%s)\n", spec.n_drafted, spec.n_accepted, spec.spec_source.c_str());
  }
  if (speedup > 0) std::printf("\nspeedup_decode %.2fx (the servers' decode tokens/s, speculative / baseline); ", speedup);
  else std::printf("\nspeedup_decode not reported by the servers; ");
  std::printf("total_time_ratio %.2fx (baseline total time / speculative, as measured here); %s\n", total_ratio,
              identical ? "identical text" : "the texts differ");
  return 0;
}

}  // namespace specchat::cli

#include "app/serve/api_response.h"

namespace specchat::serve {

using nlohmann::json;

const char* api_finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::eos:
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
    case FinishReason::context_full:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
  }
  return "stop";
}

json usage_json(const GenerationStats& s) {
  return json{{"prompt_tokens", s.n_prompt},
              {"completion_tokens", s.n_generated},
              {"total_tokens", s.n_prompt + s.n_generated}};
}

json timings_json(const GenerationStats& s) {
  return json{{"prompt_n", s.n_prompt},
              {"prompt_ms", s.prefill_ms},
              {"predicted_n", s.n_generated},
              {"predicted_ms", s.decode_ms},
              {"predicted_per_second", s.tokens_per_s()},
              {"draft_n", s.n_drafted},
              {"draft_n_accepted", s.n_accepted},
              {"acceptance_rate", s.acceptance_rate()},
              {"mean_accepted_length", s.mean_accepted_length()}};
}

namespace {
json envelope(const ResponseMeta& m, bool chunk) {
  const bool chat = m.endpoint == Endpoint::chat;
  return json{{"id", m.id},
              {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
              {"created", m.created},
              {"model", m.model}};
}
}  // namespace

json completion_json(const ResponseMeta& m, const GenerationResult& r) {
  json j = envelope(m, false);
  json choice{{"index", 0}, {"finish_reason", api_finish_reason(r.finish)}, {"logprobs", nullptr}};
  if (m.endpoint == Endpoint::chat) choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  else choice["text"] = r.text;
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(r.stats);
  j["timings"] = timings_json(r.stats);
  return j;
}

json chunk_json(const ResponseMeta& m, const std::string& text, bool first, const char* finish) {
  json j = envelope(m, true);
  json choice{{"index", 0}, {"finish_reason", finish ? json(finish) : json(nullptr)}, {"logprobs", nullptr}};
  if (m.endpoint == Endpoint::chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || !finish) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  return j;
}

json final_chunk_json(const ResponseMeta& m, const GenerationResult& r) {
  json j = chunk_json(m, "", false, api_finish_reason(r.finish));
  j["usage"] = usage_json(r.stats);
  j["timings"] = timings_json(r.stats);
  return j;
}

std::string sse_event(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace specchat::serve

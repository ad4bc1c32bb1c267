// Responses of the OpenAI-compatible API: the non-streamed objects (chat.completion,
// text_completion), the SSE chunks of a stream, and `usage` / `timings` (llama-server's names:
// prompt_n, prompt_ms, predicted_n, predicted_ms, predicted_per_second, draft_n,
// draft_n_accepted; plus acceptance_rate α and mean_accepted_length τ).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "app/serve/api_request.h"
#include "engine/generator.h"

namespace specchat::serve {

// Identity of one response: its id ("chatcmpl-N" / "cmpl-N"), creation time (Unix seconds)
// and the model name it reports.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::chat;
  std::string id;
  int64_t created = 0;
  std::string model;
};

// OpenAI's finish_reason for the engine's: eos and stop -> "stop"; length and context_full ->
// "length"; cancelled -> "cancelled" (a timed-out request).
const char* api_finish_reason(FinishReason r);

nlohmann::json usage_json(const GenerationStats& s);
nlohmann::json timings_json(const GenerationStats& s);

// The whole non-streamed response.
nlohmann::json completion_json(const ResponseMeta& m, const GenerationResult& r);
// One stream chunk carrying `text` (chat: delta.content; the first chunk of a chat stream also
// carries delta.role). `finish` null = more follows.
nlohmann::json chunk_json(const ResponseMeta& m, const std::string& text, bool first, const char* finish);
// The last chunk: finish_reason, usage and timings, no text.
nlohmann::json final_chunk_json(const ResponseMeta& m, const GenerationResult& r);
// "data: <json>\n\n" (JSON with invalid UTF-8 replaced, never thrown on).
std::string sse_event(const nlohmann::json& j);

}  // namespace specchat::serve

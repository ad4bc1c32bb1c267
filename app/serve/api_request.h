// Requests of the OpenAI-compatible API (issue 14 §2): parsing and validation of the JSON body
// of POST /v1/chat/completions and /v1/completions into an ApiRequest, and OpenAI's error shape
// for everything that is refused.
//
// Accepted parameters: messages (chat: [{role: system|user|assistant, content: string or
// [{type: "text", text}]}]) or prompt (completions: a string or a one-string array),
// max_tokens (or max_completion_tokens), temperature [0, 2], top_p (0, 1], top_k ≥ 0, seed ≥ 0,
// stop (a string or up to 4 strings), stream, stream_options, n (1 only), model (any string),
// and the speculative ones: speculative (bool), drafter (model|ngram|block|mtp|none), draft_k
// [0, 64], tree (chain|dynamic|optimal), node_budget [1, 127], depth [1, 64], branch [1, 32]
// (dynamic trees). Other keys are ignored, as OpenAI-style
// servers do for parameters they do not implement.
//
// PIPO (docs/design/pipo.md; APPROXIMATE, never a default): "decode_mode": "pipo" selects it
// ("lossless", the default, is the Engine's verified decoding); "acceptance_threshold" in [0, 1]
// (token 2 kept when the confidence head's output is at least this; default: the server's
// --pipo-threshold, else the release's recommended) is accepted only with decode_mode "pipo",
// and so is no speculative parameter ("speculative": false excepted): PIPO drafts with its own
// head, so a drafter named with it is a client's mistake, refused rather than ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "app/serve/config.h"
#include "engine/chat_template.h"
#include "engine/sampler.h"
#include "engine/runtime/spec_settings.h"

namespace specchat::serve {

// An HTTP error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // invalid_request_error | authentication_error | server_error | ...
  std::string param;                           // the offending parameter; "" = null
  std::string code;                            // machine-readable reason; "" = null
  nlohmann::json body() const;
};

enum class Endpoint { chat, completion };

// How a request decodes: lossless (the Engine; verified by the target) or pipo (approximate).
enum class DecodeMode { lossless, pipo };

struct ApiRequest {
  Endpoint endpoint = Endpoint::chat;
  std::vector<ChatMessage> messages;  // chat: the conversation, ending with the turn to answer
  std::string prompt;                 // completion: raw prompt text (continued as is)
  std::string model;                  // as the client named it ("" = none given)
  int max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop;      // at most 4, none empty
  bool stream = false;
  SpecSettings spec;                  // the server's defaults with the request's overrides
  bool drafter_named = false;         // the request gave "drafter" (a named drafter must be installed)
  DecodeMode mode = DecodeMode::lossless;
  float acceptance_threshold = -1.0f; // PIPO: [0, 1] as given; < 0 = not given (the server's default)
};

// Parses `body` for `endpoint` with the server's defaults and limits (`c`: sampling and
// speculative defaults, default_max_tokens; max_tokens above the output limit `max_output`
// is refused). Never throws: every problem is an ApiError (status 400; invalid UTF-8 and bad
// JSON included).
std::variant<ApiRequest, ApiError> parse_api_request(std::string_view body, Endpoint endpoint, const ServeConfig& c,
                                                     int max_output);

}  // namespace specchat::serve

// A streaming client for OpenAI-compatible servers (ours, llama-server, vLLM, SGLang, ...),
// shared by `specchat-cli generate/compare --endpoint` and the app's remote engine (issue 14 §7).
// The reply is streamed (SSE); speculative statistics come from the server when it reports them:
// `timings.draft_n` / `draft_n_accepted` (llama-server, specchat serve), else the change of
// vLLM's `vllm:spec_decode_num_draft_tokens_total` / `..._accepted_tokens_total` counters on its
// /metrics over the request (other requests running on that server at the same time count too).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/chat_template.h"

namespace specchat::remote {

// An endpoint URL split into what cpp-httplib's client takes: "http://host:port" and the path
// prefix before /v1 ("" for "http://host:8080" and "http://host:8080/v1"; "/api" for
// "http://host/api/v1"). Throws std::invalid_argument for a URL that is not http(s)://host...
struct EndpointUrl {
  std::string scheme_host_port;
  std::string prefix;
};
EndpointUrl parse_endpoint_url(const std::string& url);

// One generation request. `chat`: messages go to /v1/chat/completions (the server applies its
// chat template); otherwise `prompt` goes to /v1/completions.
struct RemoteRequest {
  std::string endpoint;   // http(s)://host:port[/prefix][/v1]
  std::string api_key;    // sent as "Authorization: Bearer"; empty = none
  std::string model;      // the "model" field; empty = left out (the server's default)
  bool chat = true;
  std::vector<ChatMessage> messages;
  std::string prompt;
  int max_tokens = 256;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;          // 0 = not sent
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool speculative = true;  // false sends "speculative": false (our server's baseline)
  // More body fields, set as given (for example our server's drafter, draft_k, tree and
  // node_budget, app/serve/api_request.h); null or an object.
  nlohmann::json extra;
  // Polled while the reply streams: when it becomes true the stream is closed and the result
  // so far returned with finish_reason "cancelled". May be null.
  const std::atomic<bool>* cancel = nullptr;
  int read_timeout_s = 600;
};

// What a remote generation gave.
struct RemoteResult {
  std::string text;
  std::string finish_reason;  // the server's ("stop", "length", ...), or "cancelled"
  nlohmann::json usage;     // the server's usage object (null when it sent none)
  nlohmann::json timings;   // the server's timings object (null when it sent none)
  long n_prompt = -1, n_generated = -1;  // from usage (or timings); -1 unknown
  // Speculative statistics; source "timings", "vllm_metrics", or "" (the server reported none).
  std::string spec_source;
  long n_drafted = 0, n_accepted = 0;
  double ttft_ms = 0;       // request sent -> first text received
  double total_ms = 0;      // request sent -> stream ended
};

// Sends `r` with stream true, calling `on_text` with each piece of text as it arrives. Throws
// std::runtime_error naming the endpoint for a connection failure, an HTTP error (with the
// server's error message) or a malformed stream; std::invalid_argument for a bad URL.
RemoteResult remote_generate(const RemoteRequest& r, const std::function<void(const std::string&)>& on_text);

}  // namespace specchat::remote

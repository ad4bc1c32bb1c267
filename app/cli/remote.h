// `specchat-cli generate --endpoint URL`: the same request sent to any OpenAI-compatible server
// (ours, llama-server, vLLM, SGLang, ...) instead of the local engine (issue 14 §7). The reply
// is streamed (SSE) and its speculative statistics are shown when the server reports them:
// `timings.draft_n` / `draft_n_accepted` (llama-server, specchat serve), else the change of
// vLLM's `vllm:spec_decode_num_draft_tokens_total` / `..._accepted_tokens_total` counters on its
// /metrics over the request (other requests running on that server at the same time count too).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "app/cli/options.h"

namespace specchat::cli {

// An endpoint URL split into what cpp-httplib's client takes: "http://host:port" and the path
// prefix before /v1 ("" for "http://host:8080" and "http://host:8080/v1"; "/api" for
// "http://host/api/v1"). Throws std::invalid_argument for a URL that is not http(s)://host...
struct EndpointUrl {
  std::string scheme_host_port;
  std::string prefix;
};
EndpointUrl parse_endpoint_url(const std::string& url);

// What a remote generation gave.
struct RemoteResult {
  std::string text;
  std::string finish_reason;
  nlohmann::json usage;     // the server's usage object (null when it sent none)
  nlohmann::json timings;   // the server's timings object (null when it sent none)
  long n_prompt = -1, n_generated = -1;  // from usage (or timings); -1 unknown
  // Speculative statistics; source "timings", "vllm_metrics", or "" (the server reported none).
  std::string spec_source;
  long n_drafted = 0, n_accepted = 0;
  double ttft_ms = 0;       // request sent -> first text received
  double total_ms = 0;      // request sent -> stream ended
};

// Sends the request the options describe (chat: --system/--chat as messages; else --prompt as a
// completion; -n, sampling, --stop; `draft_k` 0 sends "speculative": false) with stream true to
// o.endpoint, calling `on_text` with each piece of text as it arrives. The key: o.api_key, else
// SPECCHAT_API_KEY. Throws std::runtime_error naming the endpoint for a connection failure, an
// HTTP error (with the server's error message) or a malformed stream.
RemoteResult remote_generate(const CommonOptions& o, int draft_k, const std::function<void(const std::string&)>& on_text);

// The generate subcommand against o.endpoint: text streamed to stdout and a statistics line, or
// one JSON object with --json. Returns the exit code.
int cmd_generate_remote(const CommonOptions& o);

// The compare subcommand against endpoints: the baseline ("speculative": false) on
// o.baseline_endpoint (default o.endpoint), then the speculative request on o.endpoint (default
// o.baseline_endpoint). Reports both texts, whether they are identical (as text: remote servers
// return no token ids), speedup_decode from the servers' timings.predicted_per_second when both
// report it (as the local compare: decode tokens/s, speculative / baseline), and
// total_time_ratio (baseline total time / speculative, as the client measured it).
int cmd_compare_remote(const CommonOptions& o);

}  // namespace specchat::cli

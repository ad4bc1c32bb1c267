// `specchat-cli generate/compare --endpoint URL`: the same request sent to any OpenAI-compatible
// server (ours, llama-server, vLLM, SGLang, ...) instead of the local engine (issue 14 §7),
// through the streaming client in app/remote/openai_client.h.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "app/cli/options.h"
#include "app/remote/openai_client.h"

namespace specchat::cli {

using remote::RemoteResult;

// The request the options describe (chat: --messages, else --system/--chat as messages; else
// --prompt as a completion; -n, sampling, --stop; `draft_k` 0 sends "speculative": false) for
// o.endpoint. The key: o.api_key, else $SPECCHAT_API_KEY.
remote::RemoteRequest remote_request(const CommonOptions& o, int draft_k);
// --api-key, else $SPECCHAT_API_KEY, else "" (no key sent).
std::string endpoint_api_key(const CommonOptions& o);

// remote_request(o, draft_k) sent with remote::remote_generate (app/remote/openai_client.h).
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

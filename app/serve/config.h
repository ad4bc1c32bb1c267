// ServeConfig: everything `specchat-cli serve` is configured with (issue 14 §4), from one JSON
// config file (`--config FILE`) that command-line flags override, plus SPECCHAT_API_KEY from the
// environment (secrets never live in the file).
//
// Config file: one JSON object whose keys are the field names below (e.g.
//   {"host": "127.0.0.1", "port": 8080, "model": "target.gguf", "draft": "draft.gguf",
//    "draft_k": 4, "node_budget": 16, "temperature": 0, "parallel": 4, "queue": 16}).
// Unknown keys and wrong types are errors (a typo must not silently fall back to a default).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "engine/runtime/spec_settings.h"

namespace specchat::serve {

struct ServeConfig {
  // listening
  std::string host = "127.0.0.1";  // loopback by default; anything else needs api_key
  int port = 8080;                 // 0 = any free port (the start-up line names it)
  // models
  std::string model;               // target GGUF; empty = the bundled target
  std::string draft = "bundled";   // draft GGUF, "bundled" or "none"
  std::string manifest;            // optional JSON {"sha256": {"<file name>": "<hex>"}} checked at start-up
  std::string model_name = "specchat";  // the id /v1/models lists and responses carry
  int n_ctx = 0;                   // tokens of context (0 = the target's)
  int threads = 0;                 // CPU threads of the engine's pool (0 = all cores)
  std::string kv_type = "f16";     // KV cache rows: "f16" or "f32" (LlamaModel::Options::kv_type)
  // Quantized matrices on the CPU: "q8" (activations rounded to 8 bits) or "f32"
  // (LlamaModel::Options::activations).
  std::string activations = "q8";
  // speculative defaults of a request (SpecSettings: drafter, tree, draft_k, node_budget, ...)
  SpecSettings spec;
  // sampling defaults of a request
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  uint64_t seed = 0;
  // limits
  int default_max_tokens = 128;    // max_tokens of a request that names none
  int max_output_tokens = 0;       // largest max_tokens accepted (0 = the context length)
  int max_input_tokens = 0;        // largest prompt in tokens (0 = the context length − 1)
  size_t max_body_bytes = 1 << 20; // request bodies past this get 413
  int parallel = 4;                // sequences decoded at once (the Engine's capacity)
  int queue = 16;                  // requests waiting beyond `parallel`; past it 503 + Retry-After
  double timeout_s = 300;          // per request, queue wait included
  double read_timeout_s = 5;       // a client silent this long while sending is dropped (slow-loris)
  // logging
  std::string log_level = "info";  // debug | info | warn | error
  std::string log_path;            // empty = stderr
  bool log_content = false;        // log prompt and reply text (off: ids, lengths, counts, times only)
  // security (from --api-key or SPECCHAT_API_KEY only, never from the file)
  std::string api_key;
  // PIPO, the APPROXIMATE dual-end mode (docs/design/pipo.md): a release folder or its pipo.json
  // ("bundled" = <bundled models>/pipo, resolved by the CLI); empty = none loaded (requests
  // with "decode_mode": "pipo" get 400). Loaded once at start-up, bound to the served target.
  std::string pipo;
  double pipo_threshold = kPipoThresholdUnset;  // acceptance_threshold default, [0, 1]; unset = the release's
  int pipo_pair_size = 2;           // fixed at 2 (tokens per latent); anything else is refused
  int pipo_extra_draft_tokens = 1;  // fixed at 1 (tokens the MTP head adds per step)
  // The fidelity gauge: every this many steps of a PIPO reply, the KL of token 1 against the
  // plain target (a second copy of the target, loaded for it); 0 = off (the default).
  int pipo_fidelity = 0;
  static constexpr double kPipoThresholdUnset = -1.0;
};

// A bad config file or flag combination, in words; the server refuses to start.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Applies the keys of `j` (a JSON object) onto `c`. Throws ConfigError for a non-object, an
// unknown key, a value of the wrong type, or "api_key" (secrets come from the environment).
void apply_config_json(const nlohmann::json& j, ServeConfig& c);
// Reads and applies a config file. Throws ConfigError when it cannot be read or parsed.
void apply_config_file(const std::string& path, ServeConfig& c);

// Checks ranges and the security rule: a host that is not loopback needs an api_key; PIPO:
// pipo_threshold in [0, 1] (or unset) and only with pipo, pipo_pair_size 2, pipo_extra_draft_tokens
// 1. Throws ConfigError naming the problem.
void validate_config(const ServeConfig& c);

// True for "localhost", 127.0.0.0/8 and ::1 (the only binds that need no key).
bool is_loopback_host(const std::string& host);

}  // namespace specchat::serve

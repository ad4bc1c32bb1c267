// What a benchmark run records: one RequestRecord per request, one WaveRecord per group of
// requests decoded together, and the run's metadata. Times in milliseconds, measured by the
// runner's steady clock from the moment a wave's requests are queued.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace specchat::bench {

struct RequestRecord {
  std::string prompt_id, category, tier;  // tier empty for qualitative prompts
  int bucket = 0;                         // throughput prompts: the bucket (tokens)
  std::string config;                     // BenchConfig::name
  int concurrency = 1;                    // sequences decoded together
  int repeat = 0;                         // 0-based repetition of the whole sweep
  int wave = 0;                           // index of the wave within (repeat, concurrency)
  int input_tokens = 0, max_tokens = 0;
  int output_tokens = 0;                  // tokens emitted
  int steps = 0;                          // target verification (decode) forwards
  // Tokens the steps produced, an EOS that ended the reply included (GenerationStats::
  // n_target_tokens); 0 in records that did not store it. τ's numerator: tau_tokens().
  int target_tokens = 0;
  int tau_tokens() const { return target_tokens > output_tokens ? target_tokens : output_tokens; }
  int drafted = 0, accepted = 0;          // draft tokens proposed / accepted and emitted
  int empty_drafts = 0;                   // steps whose draft was empty
  double ttft_ms = 0;                     // queued -> first token
  double latency_ms = 0;                  // queued -> last token
  double tpot_ms = 0;                     // (latency - ttft) / (output_tokens - 1); 0 for one token
  // [steps] accepted draft tokens of each verification step, in order (the bonus token is not
  // counted): from GenerationResult::drafted, where each step emits its accepted drafts then one
  // token of the target's own (PIPO: token 1, then the head's token 2 when confident).
  std::vector<int> accept_lengths;
  // [depth] steps whose first p+1 draft positions were all accepted (p = 0 .. depth-1), and the
  // steps that drafted at all (draft_steps): α at position p is accepted_at[p] / accepted_at[p-1]
  // (draft_steps for p = 0), the acceptance of position p given the positions before it.
  std::vector<int> accepted_at;
  int draft_steps = 0;
  std::string output_hash;                // FNV-1a 64 of the output token ids, hex
  // Greedy identity with baseline (same prompt, concurrency and repeat): false = a failure,
  // kept out of every aggregate. first_diff = first differing token index, -1 when identical.
  bool identical = true;
  int first_diff = -1;
  // An approximate configuration (PIPO): a difference from baseline is its measured divergence,
  // not a failure.
  bool approximate = false;
  // The PIPO fidelity gauge (bench --pipo-fidelity N): KL(plain target || PIPO) of token 1 in
  // nats, summed over `fidelity_samples` sampled steps, and its largest sample. 0 samples = off.
  int fidelity_samples = 0;
  double fidelity_kl_sum = 0, fidelity_kl_max = 0;
  std::string error;                      // non-empty: the request failed (also a failure)

  double user_tokens_per_s() const { return latency_ms > 0 ? output_tokens / (latency_ms / 1000.0) : 0; }
  bool failed() const { return (!identical && !approximate) || !error.empty(); }
};

struct WaveRecord {
  std::string config;
  int concurrency = 1, repeat = 0, wave = 0;
  int requests = 0;
  long output_tokens = 0;
  double wall_ms = 0;  // queued -> last request finished (prefill included)
};

// Where and how a run was made (the report's header).
struct RunMeta {
  std::string date_utc;      // ISO 8601
  std::string git_commit;    // of the SpecChat source tree, or "unknown"
  std::string cpu_model;
  int cpu_cores = 0;
  std::string gpu;           // "none" when no GPU is in use
  std::string backend;       // cpu | cuda
  std::string target_model, target_sha256, draft_model, draft_sha256;
  std::string suite_name, suite_path;
  nlohmann::json settings;   // configs, concurrency, repeat, max_tokens, max_time, seed, threads
  bool truncated = false;    // --max-time stopped the sweep early
};

struct BenchRun {
  RunMeta meta;
  std::vector<RequestRecord> records;
  std::vector<WaveRecord> waves;
};

nlohmann::json record_json(const RequestRecord& r);
RequestRecord record_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception
nlohmann::json wave_json(const WaveRecord& w);
WaveRecord wave_from_json(const nlohmann::json& j);
nlohmann::json meta_json(const RunMeta& m);
RunMeta meta_from_json(const nlohmann::json& j);

// Where a step's accepted draft tokens sit among its emitted tokens.
enum class DraftOrder {
  drafts_then_token,  // speculative decoding: accepted drafts, then the target's bonus token
  token_then_draft,   // PIPO: the backbone's token 1, then the MTP head's token 2 (if confident)
};
// accept_lengths ([steps], accepted drafts per step) from the per-token drafted flags
// ([n_generated], 1 = accepted draft token). A last step cut by max_tokens or a stop counts.
std::vector<int> accept_lengths_from_flags(const std::vector<uint8_t>& drafted,
                                           DraftOrder order = DraftOrder::drafts_then_token);
// FNV-1a 64 of the ids, as 16 hex digits.
std::string token_hash(const std::vector<int32_t>& ids);

}  // namespace specchat::bench

// Generator: prefill, the speculative decode loop, stop conditions, cancellation, streaming
// and statistics. Baseline decoding is the same loop with no drafter (one code path, so
// "speculative == baseline" is testable token for token; ARCHITECTURE.md §2).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/speculative/drafter.h"

namespace specchat {

class LlamaModel;

enum class FinishReason { length, eos, stop, cancelled, context_full };
const char* finish_reason_name(FinishReason r);

// Who drafts a request: the draft model (ModelDrafter), n-gram prompt lookup (NgramDrafter), or
// a drafter that reads the target's hidden states (docs/design/target-feature-drafters.md): the
// DFlash block drafter (`block`) or an MTP head (`mtp`). The last two run only in an Engine
// given a factory for them (Engine::set_drafter_factory).
enum class DrafterKind { model, ngram, block, mtp };
// "model", "ngram", "block", "mtp".
const char* drafter_kind_name(DrafterKind k);

// Speculative configuration of a request.
struct SpecConfig {
  int draft_k = 4;                       // chain length; 0 = baseline (no drafter at all)
  DrafterKind drafter = DrafterKind::model;
  TreeBudget tree;                       // mode chain uses draft_k for node budget and depth
  // Draft back-off (engine/speculative/draft_backoff.h): drafting pauses while drafts keep
  // failing (4 steps in a row with nothing accepted: 8 plain steps, doubling per failed probe up
  // to 256). Model, block and MTP drafters only (not n-gram). Lossless either way; off measures
  // raw drafting.
  bool backoff = true;
  // The budget a step really uses: for chains node_budget = depth = draft_k.
  TreeBudget effective_budget() const;
};

struct GenerateRequest {
  std::vector<int32_t> prompt;          // [n_prompt] ids, BOS included when the model wants it
  int max_tokens = 128;                 // N: at most this many tokens are generated (0 = none)
  SamplingParams sampling;
  SpecConfig spec;
  std::vector<std::string> stop_strings;  // text that ends generation (not emitted)
};

// One emitted token, in order. `drafted` = proposed by the drafter and accepted by the target;
// false = sampled by the target itself (the correction or bonus token). `step` counts target
// verification steps from 0.
struct GenerationStats;

struct TokenEvent {
  int32_t id = 0;
  bool drafted = false;
  int step = 0;
  std::string text;  // newly complete UTF-8 text this token releases (may be empty)
  // Running statistics of the request (n_generated, n_accepted, n_drafted, n_steps, times and
  // accepted_hist so far), for live displays; valid only during the callback. The final values
  // are in GenerationResult::stats.
  const GenerationStats* stats = nullptr;
};

// Statistics of one generation (ARCHITECTURE.md §6). Times in milliseconds.
struct GenerationStats {
  int n_prompt = 0;
  int n_prompt_cached = 0;    // prompt tokens whose target KV was kept from the previous request
  int n_generated = 0;        // tokens emitted == tokens.size()
  int n_drafted = 0;          // draft tokens proposed to the target
  int n_accepted = 0;         // drafted tokens accepted *and emitted*
  int n_steps = 0;            // target verification (decode) forwards
  // Tokens the verification steps produced: n_generated plus an EOS/end-of-turn token that ended
  // the reply (never in `tokens`). τ's numerator, so plain decoding has τ = 1 exactly. 0 in
  // statistics that did not record it (then τ falls back to n_generated).
  int n_target_tokens = 0;
  int n_empty_drafts = 0;     // steps whose draft was empty
  int n_backoff_steps = 0;    // steps decoded without a draft because the draft back-off paused it
  double prefill_ms = 0;      // prompt processing, both models
  double ttft_ms = 0;         // request start -> first token available
  double decode_ms = 0;       // end of prefill -> last token (draft + verify + sample)
  double draft_ms = 0, verify_ms = 0, sample_ms = 0;
  std::vector<int> accepted_hist;  // [depth + 1]: steps by number of accepted drafts
  // Decode speed: n_generated / decode time (draft + verify + sampling, prefill excluded;
  // FAULT-KINDS B23); 0 when nothing was generated.
  double tokens_per_s() const;
  double tpot_ms() const;          // decode_ms / n_generated

  double acceptance_rate() const;  // α = n_accepted / n_drafted (0 when nothing drafted)
  double mean_accepted_length() const;  // τ = n_target_tokens / n_steps (bonus tokens included)
};

struct GenerationResult {
  std::vector<int32_t> tokens;      // [n_generated] ids emitted (stop string / EOS excluded)
  std::vector<uint8_t> drafted;     // [n_generated] 1 = accepted draft token
  std::string text;                 // UTF-8; an incomplete tail becomes U+FFFD (B17)
  FinishReason finish = FinishReason::length;
  GenerationStats stats;
};

// Called for each emitted token, in order, on the generating thread.
using TokenCallback = std::function<void(const TokenEvent&)>;

// Errors a request can raise before generating (typed for the CLI's --json and the UI).
class GenerationError : public std::runtime_error {
 public:
  GenerationError(std::string kind, const std::string& m) : std::runtime_error(m), kind_(std::move(kind)) {}
  const std::string& kind() const { return kind_; }  // "prompt_too_long", "empty_prompt", ...
 private:
  std::string kind_;
};

class Engine;
struct EngineShare;

// One request at a time over an Engine (engine/runtime/engine.h): the blocking call the CLI,
// the calibration and the tests use. Requests of several callers at once go to the Engine.
class Generator {
 public:
  // `target` must outlive the generator; `draft` may be null (then only the n-gram drafter or
  // baseline are available). The draft's vocabulary must already have been checked
  // (check_draft_vocab). A request for the model drafter without a draft model runs baseline.
  // `share`: the KV sequences and turn lock of its Engine when another engine on another
  // thread uses the same models (EngineShare, engine/runtime/engine.h); null = all of them.
  Generator(LlamaModel& target, LlamaModel* draft, const EngineShare* share = nullptr);
  ~Generator();

  // Runs one request to its end. The KV caches keep the longest prefix shared with the
  // previous request (multi-turn reuse). Throws GenerationError for an empty prompt or one
  // that does not fit the context with room for one token, and "drafter_unavailable" for a
  // block or mtp drafter not installed in engine(). `cancel` may be null.
  GenerationResult generate(const GenerateRequest& req, const TokenCallback& on_token = {},
                            const std::atomic<bool>* cancel = nullptr);

  LlamaModel& target();
  LlamaModel* draft();
  // The engine it runs requests on (e.g. to install feature drafters, Engine::set_drafter_factory).
  Engine& engine() { return *engine_; }
  // Forgets the cached prefixes (the next request is a cold run).
  void clear_cache();

  // Runs `req` for a few tokens (at most 8), untimed, then clears the caches: touches every
  // weight page of both models and wakes the CPU pool, so the first timed run of a compare does
  // not pay the cold start the second one does not (seen: plain vs plain "1.77x" without it).
  void warm_up(const GenerateRequest& req);

 private:
  std::unique_ptr<Engine> engine_;
};

}  // namespace specchat

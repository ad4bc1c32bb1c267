// PIPO decoding (docs/design/pipo.md): a loaded release unit (backbone, MTP head, io ends) and
// one sequence's decode state over a pair sequence. APPROXIMATE: the second token of a step is
// not verified by the target; front ends label every PIPO reply so.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/drafters/mtp_model.h"
#include "engine/model.h"
#include "engine/pipo/pipo_io.h"
#include "engine/sampler.h"

namespace specchat {

// What the manifest says about the release (filled by load_pipo_release, pipo_release.h).
struct PipoReleaseInfo {
  std::string release;         // pipo.release of every part
  std::string manifest_path;   // the pipo.json read
  std::string target_sha256;   // the plain target the unit was trained from
  std::string target_file;     // its path as the manifest names it (resolved), may not exist
  float recommended_threshold = 0.85f;
  std::string quality_json;    // the manifest's "quality" object, serialised ("{}" when absent)
};

// The three parts, loaded and bound to each other. Move-only; the backbone is mutable (its KV
// pool), the head and io ends are immutable and shared.
struct PipoUnit {
  PipoReleaseInfo info;
  std::unique_ptr<LlamaModel> backbone;
  std::shared_ptr<const MtpModel> mtp;
  std::shared_ptr<const PipoIo> io;
};

// Settings of the mode (docs/design/pipo.md, "Settings").
struct PipoSettings {
  int pair_size = 2;             // fixed
  int extra_draft_tokens = 1;    // fixed
  float acceptance_threshold = 0.85f;  // keep token 2 when confidence >= this; 1 = never
  int raw_context = 0;           // user-facing limit in raw tokens; 0 = 2 × the backbone's n_ctx
  // Throws PipoError(bad_setting) naming the setting: pair_size != 2, extra_draft_tokens != 1,
  // a threshold outside [0, 1] or not finite, raw_context < 0.
  void validate() const;
  // Pairs the backbone's KV cache may hold for this request: min(backbone n_ctx, raw limit).
  int latent_context(int backbone_n_ctx) const;
  // The raw limit in force: raw_context capped at 2 × backbone_n_ctx (two raw tokens per pair),
  // or 2 × backbone_n_ctx when 0.
  int raw_limit(int backbone_n_ctx) const;
};

// One decode step's outcome: the pair appended.
struct PipoStep {
  int32_t t1 = 0;
  int32_t t2 = kPipoPad;         // kPipoPad when the head did not run or its token was dropped
  bool head_ran = false;         // the MTP head and confidence head ran this step
  int32_t proposed = kPipoPad;   // the head's token when it was kept (its LM head runs only then)
  float confidence = -1.0f;      // the confidence head's output when head_ran, else −1
  bool stop = false;             // t1 or t2 ends the turn
};

// Counters of a reply (or a whole run): monitoring (docs/design/pipo.md, "Monitoring").
struct PipoCounters {
  long steps = 0;       // decode steps (pairs appended by decoding)
  long head_runs = 0;   // steps that ran the MTP + confidence heads
  long accepted = 0;    // of those, token 2 kept (confidence >= threshold)
  long raw_tokens = 0;  // tokens emitted (PADs not counted)
  double acceptance_rate() const { return head_runs ? static_cast<double>(accepted) / static_cast<double>(head_runs) : 0.0; }
  double tokens_per_step() const { return steps ? static_cast<double>(raw_tokens) / static_cast<double>(steps) : 0.0; }
};

// Checks a pair sequence: even length, first slots vocabulary ids, second slots ids or
// kPipoPad. Throws std::invalid_argument naming the offending index.
void check_pair_sequence(std::span<const int32_t> pairs, int n_vocab);

// Number of non-PAD ids in a pair sequence.
int raw_length(std::span<const int32_t> pairs);

// One sequence of a PipoUnit: the pair ids fed to the backbone (its KV cache, one slot per
// pair, in sequence `seq` of the backbone's pool), the hidden state of every fed pair (the MTP
// head's context, caught up lazily: threshold 1 never runs it) and the MTP head's rows.
class PipoSession {
 public:
  // `unit` must outlive the session; seq in [0, backbone n_seq).
  explicit PipoSession(PipoUnit& unit, int seq = 0);

  // Makes the session hold exactly `pairs` (checked by check_pair_sequence): keeps the longest
  // prefix of whole pairs it already holds (an even raw boundary; never a half pair), feeds the
  // rest, and computes the last pair's logits and hidden state. Returns the number of pairs
  // reused. Throws std::invalid_argument (bad sequence, empty), std::length_error (more pairs
  // than the backbone's n_ctx).
  int sync(std::span<const int32_t> pairs);

  // One decode step from the current end (sync first): samples t1 from the backbone's logits;
  // unless t1 is in `stop_ids` or threshold >= 1, runs the MTP head (t2 sampled from its
  // logits) and the confidence head, and keeps t2 iff confidence >= threshold. Appends the pair
  // and, unless it stops, feeds it (the next step's logits). Throws std::length_error when the
  // backbone's cache is full, std::logic_error before the first sync.
  PipoStep step(const SamplingParams& sp, Rng& rng, float threshold, std::span<const int32_t> stop_ids);

  std::span<const int32_t> pairs() const { return pairs_; }
  int n_pairs() const { return static_cast<int>(pairs_.size() / 2); }
  // Logits [n_vocab] of the last fed pair (what the next t1 is sampled from).
  std::span<const float> last_logits() const { return logits_; }
  int seq() const { return seq_; }
  const PipoUnit& unit() const { return u_; }
  // The backbone's KV cache length in pairs.
  int n_ctx() const { return u_.backbone->n_ctx(); }

 private:
  void feed(int from_pair);        // backbone rows for pairs_[from_pair..]
  void mtp_catch_up(int upto_row); // MTP rows [state.n, upto_row) from stored hidden states
  void latent(int32_t a, int32_t b, float* out);  // compress, (t, PAD) cached
  PipoUnit& u_;
  int seq_ = 0;
  int fed_ = 0;                    // pairs in the backbone cache (= n_pairs() unless a stop pair is pending)
  std::vector<int32_t> pairs_;     // [2 · n_pairs]
  std::vector<float> hidden_;      // [fed_, d_model] last-layer hidden state of every fed pair
  std::vector<float> logits_;      // [n_vocab] of the last fed pair
  MtpState mtp_;
  PipoIoScratch io_scratch_;
  Distribution dist_;
  SamplerScratch sampler_scratch_;
  std::vector<float> g_, head_logits_, latent_;
  std::unordered_map<int32_t, std::vector<float>> pad_latents_;  // t -> latent of (t, PAD)
};

// The fidelity gauge (docs/design/pipo.md, "Monitoring"): on one step in `every`, the plain
// target is run on the raw prefix the step's token 1 follows and KL(plain ‖ PIPO) of token 1's
// distributions (softmax of the logits, temperature 1, whole vocabulary; nats) is recorded.
struct PipoFidelity {
  LlamaModel* plain = nullptr;  // the plain target (same vocabulary), its sequence `seq`
  int seq = 0;
  int every = 16;               // > 0
  // results
  int samples = 0;
  double kl_sum = 0, kl_max = 0;
  double mean_kl() const { return samples ? kl_sum / samples : 0.0; }
};

// KL(p ‖ q) in nats of softmax(p_logits) against softmax(q_logits), both [n_vocab].
double kl_of_logits(std::span<const float> p_logits, std::span<const float> q_logits);

// A reply generated in PIPO mode.
struct PipoReply {
  std::vector<int32_t> new_pairs;  // the pairs appended by decoding (PADs included)
  std::vector<int32_t> raw;        // the reply's tokens (PADs dropped)
  PipoCounters counters;
  int prompt_pairs = 0, reused_pairs = 0;
  int first_step_tokens = 0;  // raw tokens of the first step (TPOT counts the others)
  double ttft_s = 0;   // from the call to the first token (prefill + first step)
  double total_s = 0;     // monitoring (the fidelity gauge) excluded, from ttft_s and total_s
  double monitor_s = 0;   // time the fidelity gauge took
  std::string stop_reason;  // "stop" (end of turn), "length" (max_tokens), "context" (latent/raw limit), "cancelled"
};

struct PipoGenerateOptions {
  int max_tokens = 256;           // raw tokens of the reply at most
  SamplingParams sampling;
  PipoSettings settings;
  std::vector<int32_t> stop_ids;  // end-of-turn ids (eos, eot)
  // Called after each step with the raw tokens it emitted (1 or 2); false cancels.
  std::function<bool(std::span<const int32_t> raw)> on_tokens;
  // The fidelity gauge; null = off. Its counters accumulate over the calls it is given to.
  PipoFidelity* fidelity = nullptr;
};

// Syncs `s` to `prompt_pairs` and decodes until a stop token, max_tokens, the context limit
// (raw or latent) or cancellation. Throws as PipoSession::sync / step and PipoSettings::validate.
PipoReply pipo_generate(PipoSession& s, std::span<const int32_t> prompt_pairs, const PipoGenerateOptions& opt);

}  // namespace specchat

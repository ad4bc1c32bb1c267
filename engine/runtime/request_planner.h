// RequestPlanner: the request policy every front end shares (ARCHITECTURE.md §1, §3): how a
// conversation is fitted into the context, how the tree of a speculative step is planned from
// the settings and the pair's calibration, and what a compare run reports. The CLI, the app's
// engine worker and the server are adapters over it; none of them decides these things itself.
//
// Each policy has a pure form (static, no models: what the unit tests exercise) and a form
// bound to a loaded ModelPair (what the front ends call).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/chat_context.h"
#include "engine/drafters/install.h"
#include "engine/generator.h"
#include "engine/runtime/spec_settings.h"
#include "engine/speculative/budget.h"
#include "engine/speculative/calibration_store.h"
#include "engine/speculative/feature_calibration.h"
#include "engine/speculative/sequoia.h"

namespace specchat {

struct ModelPair;

// ---- context fitting ------------------------------------------------------------------------

// A conversation fitted into the context.
struct ContextFit {
  std::vector<int32_t> prompt;  // [n_prompt] ids, BOS first when the vocabulary wants it
  int n_dropped = 0;            // oldest messages left out (whole exchanges), 0 when all fit
  int reserve = 0;              // tokens kept free for the reply: max(1, min(max_tokens, n_ctx / 2))
  bool reused_ids = false;      // stored reply ids were spliced in (ChatContext::reused_ids)
  // false: even with every droppable turn left out, the prompt leaves no room for one new token
  // (n_prompt ≥ n_ctx); `problem` says so in words. The request must not be run.
  bool fits = true;
  std::string problem;
};

// Encodes a conversation into prompt ids (build_chat_context in the bound form).
using ContextEncoder = std::function<ChatContext(const std::vector<ContextMessage>&)>;

// ---- tree planning --------------------------------------------------------------------------

// What plan_tree knows about the loaded pair (the pure form's input).
struct PlanContext {
  bool has_draft_model = false;
  // Drafters reading the target's hidden states installed in the engine that runs the request
  // (Engine::set_drafter_factory): the block drafter's block size B (its block holds the anchor
  // and B − 1 drafted tokens; 0 = no block drafter), and whether an MTP head is installed.
  int block_size = 0;
  bool has_mtp = false;
  int max_nodes = 1;         // most tree nodes one verification forward takes (target max_batch − 1), ≥ 1
  Calibration calibration;   // of the pair; consulted only for optimal and auto trees of the model drafter
  // Of the block or MTP drafter the request asks for (engine/speculative/feature_calibration.h);
  // consulted only for their auto trees.
  FeatureCalibration feature_calibration;
  // Measures step timings now (auto trees when the calibration has none for this thread count);
  // empty = cannot measure. Returns an invalid table when it could not time the models.
  std::function<StepTimings()> measure_timings;
};

// The speculative side of one request, ready to run.
struct TreePlan {
  // The settings that run, resolved: budgets clamped, fallbacks applied, auto turned into a
  // chain or an optimal tree, drafter none when nothing drafts.
  SpecSettings settings;
  SpecConfig spec;                      // to_spec_config(settings, shape): what the request runs with
  TreeShape shape;                      // the Sequoia tree of an optimal plan; empty otherwise
  // Optimal and auto plans of the model drafter: where the acceptance vector came from
  // ("calibration", or "fallback" for the prior a[r] = 0.5^(r+1); "prior" for the optimal trees
  // of the other drafters, which have no such calibration), the vector ([R]), and the
  // calibration file looked at (found: it exists and was made for these model files). Empty/false
  // for other plans.
  std::string acceptance_source;
  // How the acceptance was modelled for optimal and auto plans of the model drafter: "rank
  // paths" (the calibration's measured rank sequences, RankPathModel) or "independent ranks"
  // (Sequoia's product of a[r] along a path); empty for other plans.
  std::string acceptance_model;
  std::vector<double> accept_by_rank;
  std::string calibration_path;
  bool calibration_found = false;
  // Auto plans: where the timings came from ("calibration": the calibration file's table,
  // "cache": those an earlier auto run measured and cached (timing_cache_path), or "measured":
  // timed now, then cached), the choice (its
  // expected tokens per step, modelled step time in ms) and the modelled plain decoding time
  // per token (ms, t_verify(0)). Empty/zero for other plans. Auto plans of the block and MTP
  // drafters come from measured configurations (feature_calibration.h): timings_source
  // "calibration", choice.expected_tokens = the measured τ, choice.step_ms = τ / tokens/s, and
  // baseline_ms_per_token from the measured plain decoding speed.
  std::string timings_source;
  BudgetChoice choice;
  double baseline_ms_per_token = 0;
  // Settings that could not be honoured and what runs instead, in words (no final period).
  std::vector<std::string> warnings;

  bool speculative() const { return spec.draft_k > 0; }
  // E[tokens per step] of optimal and auto plans (bonus included); 0 when not modelled.
  double expected_tokens() const;
};

// ---- compare runs ---------------------------------------------------------------------------

// One side of a compare run (baseline or speculative), both run from a cold cache.
struct CompareRun {
  std::vector<int32_t> tokens;  // [n_generated] ids emitted
  GenerationStats stats;        // its statistics; tokens_per_s() is the decode speed
  // Wall time of its Generator::generate call in ms: request start to the last token, prefill
  // included (what a user waits for).
  double total_ms = 0;
};

// What a compare run reports (ARCHITECTURE.md §6 names).
struct CompareOutcome {
  bool identical = false;   // the token streams are equal
  long first_diff = -1;     // first differing position (a prefix differs where it ends); -1 exactly when identical
  // THE speedup: speculative decode tokens/s over baseline decode tokens/s
  // (GenerationStats::tokens_per_s: tokens over decode time, prefill excluded). 0 when either
  // side generated nothing.
  double speedup_decode = 0;
  // Baseline total time over speculative total time (CompareRun::total_ms, prefill included):
  // > 1 when the speculative run finished sooner. Reported beside the speedup, never as it.
  // 0 when either time is 0.
  double total_time_ratio = 0;
};

class RequestPlanner {
 public:
  // `pair` must outlive the planner. `threads` is the thread count the models were loaded with
  // (PairOptions::n_threads, 0 = all cores): timings in the calibration are kept per count.
  explicit RequestPlanner(const ModelPair& pair, int threads = 0);

  // The feature drafters the front end installed in its Engine (PlanContext::block_size,
  // has_mtp); none until told.
  // Their files' calibrations serve `--tree auto` for them (load_feature_calibration).
  void set_feature_drafters(const FeatureDrafters& fd);

  // Fits `messages` (oldest first, optional system messages, ending with the turn to answer;
  // assistant messages may carry their stored ids) into the target's context, leaving
  // `reserve` = max(1, min(max_tokens, n_ctx / 2)) tokens for the reply: capped at half the
  // context so a long max_tokens never pushes the whole history out. Earlier replies' stored
  // ids are spliced in (build_chat_context: the previous turn's KV prefix is reused). While the
  // prompt plus the reserve exceeds n_ctx, the oldest exchange (the first non-system message and
  // the assistant replies that follow it) is left out; system messages and the last message are
  // never dropped. A prompt that still fills the context (n_prompt ≥ n_ctx) gives fits = false;
  // one that fits but leaves less than the reserve runs (the reply may end "context_full").
  // Throws what build_chat_context throws (GenerationError "empty_prompt", std::invalid_argument
  // for a bad role).
  ContextFit fit_context(const std::vector<ContextMessage>& messages, int max_tokens) const;
  // The pure form: `n_ctx` tokens of context, `encode` for the ids. Same rules.
  static ContextFit fit_context(std::vector<ContextMessage> messages, int max_tokens, int n_ctx,
                                const ContextEncoder& encode);

  // Plans the speculative side of a request on the pair. `prompt` ([n_prompt] ids) is needed
  // only by auto trees that must time the models now (it is the context the timings run on).
  // Rules, in order:
  //  - drafter none or draft_k ≤ 0: plain decoding. The model drafter without a draft model, the
  //    block drafter without one installed (block_size < 2) and the MTP drafter without an MTP
  //    head: plain decoding and a warning.
  //  - budgets are clamped: draft_k and node_budget to [1, max_nodes], depth to [1, node_budget],
  //    branch to [1, kMaxBranch]. The block drafter drafts at most B − 1 tokens deep (one block): draft_k
  //    and depth are also clamped to B − 1 (warning when a requested value is cut); its trees
  //    are built from the block's marginals with node_budget / depth / branch.
  //  - the n-gram, block and MTP drafters have no acceptance by rank: their optimal trees are
  //    the Sequoia shape of the prior a[r] = 0.5^(r+1) for (node_budget, depth) (warning;
  //    acceptance_source "prior"). The n-gram drafter's auto tree is a dynamic tree with the
  //    same budget (warning). The block and MTP drafters' auto trees run the fastest
  //    configuration their calibration measured (plain decoding when none beat it); without a
  //    usable calibration, a dynamic tree (warning naming the fix).
  //  - optimal (Sequoia §3.1): the tree for (node_budget, depth) from the calibration's
  //    acceptance vector. auto (Sequoia §3.3): choose_budget over N ≤ min(64, max_nodes) with
  //    the calibration's timings for this setup, else those cached by an earlier auto run, else
  //    timings measured now on `prompt` (BOS repeated when it is empty) and cached in the user's
  //    timing cache (timing_cache_path;
  //    the calibration file is never written); plain decoding when drafting does not pay.
  //  - THE fallback: when the calibration is missing, for other model files, unreadable or
  //    without a usable acceptance vector, the prior a[r] = 0.5^(r+1) (r < 8) stands in for it,
  //    with a warning naming the problem (acceptance_source "fallback"). The requested shape
  //    family is kept; a calibration run replaces the prior.
  // Throws std::runtime_error when an auto tree cannot get timings (the models could not be
  // timed on this context). Warnings never throw.
  TreePlan plan_tree(const SpecSettings& s, std::span<const int32_t> prompt = {}) const;
  // The pure form: the same rules over `ctx` instead of a loaded pair.
  static TreePlan plan_tree(const SpecSettings& s, const PlanContext& ctx);

  // The prior acceptance vector of the fallback: a[r] = 0.5 · 0.5^r for r < 8 ([8]).
  static std::vector<double> prior_accept_by_rank();

  // Compares a baseline run with a speculative run of the same request (see CompareOutcome for
  // the definitions). Never throws.
  static CompareOutcome compare(const CompareRun& baseline, const CompareRun& speculative);
  // First index where the token lists differ (the shorter one's length when one is a prefix of
  // the other), -1 when identical.
  static long first_difference(std::span<const int32_t> a, std::span<const int32_t> b);

 private:
  const ModelPair& pair_;
  int threads_;
  FeatureDrafters features_;
};

}  // namespace specchat

#include "engine/runtime/request_planner.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <exception>
#include <stdexcept>

#include "engine/model.h"
#include "engine/model_pair.h"
#include "engine/speculative/calibration.h"

namespace specchat {

namespace {

constexpr const char* kPriorText = "a[r] = 0.5^(r+1)";

}  // namespace

double TreePlan::expected_tokens() const {
  if (!timings_source.empty()) return choice.expected_tokens;
  if (!acceptance_source.empty() && settings.tree == TreeMode::optimal) return shape.expected_tokens;
  return 0.0;
}

RequestPlanner::RequestPlanner(const ModelPair& pair, int threads) : pair_(pair), threads_(threads) {}

void RequestPlanner::set_feature_drafters(const FeatureDrafters& fd) { features_ = fd; }

// ---- context fitting ------------------------------------------------------------------------

ContextFit RequestPlanner::fit_context(const std::vector<ContextMessage>& messages, int max_tokens) const {
  const ModelPair& pair = pair_;
  return fit_context(messages, max_tokens, pair.target->n_ctx(),
                     [&pair](const std::vector<ContextMessage>& m) { return build_chat_context(pair, m); });
}

ContextFit RequestPlanner::fit_context(std::vector<ContextMessage> messages, int max_tokens, int n_ctx,
                                      const ContextEncoder& encode) {
  ContextFit fit;
  fit.reserve = std::max(1, std::min(max_tokens, n_ctx / 2));
  ChatContext c = encode(messages);
  auto too_long = [&] { return static_cast<long>(c.prompt.size()) + fit.reserve > n_ctx; };
  while (too_long()) {
    auto first = std::find_if(messages.begin(), messages.end(),
                              [](const ContextMessage& m) { return m.message.role != "system"; });
    if (first == messages.end() || first + 1 == messages.end()) break;
    // Drop a whole exchange: the oldest turn together with the replies that follow it.
    do {
      first = messages.erase(first);
      ++fit.n_dropped;
    } while (first + 1 < messages.end() && first->message.role == "assistant");
    c = encode(messages);
  }
  fit.prompt = std::move(c.prompt);
  fit.reused_ids = c.reused_ids;
  fit.fits = static_cast<long>(fit.prompt.size()) < n_ctx;
  if (!fit.fits) {
    fit.problem = "this message has " + std::to_string(fit.prompt.size()) +
                  " tokens with the chat template; the context holds " + std::to_string(n_ctx) +
                  " and needs room for the reply";
  }
  return fit;
}

// ---- tree planning --------------------------------------------------------------------------

std::vector<double> RequestPlanner::prior_accept_by_rank() {
  std::vector<double> a;
  for (int r = 0; r < 8; ++r) a.push_back(0.5 * std::pow(0.5, r));
  return a;
}

TreePlan RequestPlanner::plan_tree(const SpecSettings& requested, const PlanContext& ctx) {
  TreePlan p;
  SpecSettings s = requested;
  auto finish = [&p, &s]() -> TreePlan {
    if (!s.drafts()) {
      s.drafter = DrafterChoice::none;
      s.auto_tree = false;
    }
    p.settings = s;
    p.spec = to_spec_config(s, p.shape);
    return std::move(p);
  };
  if (!s.drafts()) return finish();
  const char* missing = s.drafter == DrafterChoice::model && !ctx.has_draft_model   ? "no draft model loaded"
                        : s.drafter == DrafterChoice::block && ctx.block_size < 2 ? "no block drafter loaded"
                        : s.drafter == DrafterChoice::mtp && !ctx.has_mtp        ? "no MTP head loaded"
                                                                                  : nullptr;
  if (missing) {
    p.warnings.push_back(std::string(missing) + ": generating without a drafter");
    s.drafter = DrafterChoice::none;
    return finish();
  }
  const int max_nodes = std::max(1, ctx.max_nodes);
  s.draft_k = std::clamp(s.draft_k, 1, max_nodes);
  s.node_budget = std::clamp(s.node_budget, 1, max_nodes);
  s.depth = std::clamp(s.depth, 1, s.node_budget);
  s.branch = std::clamp(s.branch, 1, kMaxBranch);
  if (s.drafter == DrafterChoice::block) {
    // One block drafts B − 1 tokens: nothing deeper exists (DFlash §3).
    const int deepest = ctx.block_size - 1;
    const bool chain = !s.auto_tree && s.tree == TreeMode::chain;
    if (chain && s.draft_k > deepest) {
      p.warnings.push_back("the block drafter drafts at most " + std::to_string(deepest) + " tokens per step: draft_k " +
                           std::to_string(s.draft_k) + " -> " + std::to_string(deepest));
    } else if (!chain && s.depth > deepest) {
      p.warnings.push_back("the block drafter's trees are at most " + std::to_string(deepest) + " deep: depth " +
                           std::to_string(s.depth) + " -> " + std::to_string(deepest));
    }
    s.draft_k = std::min(s.draft_k, deepest);
    s.depth = std::min(s.depth, deepest);
  }
  if (!s.auto_tree && s.tree != TreeMode::optimal) return finish();

  const bool feature = s.drafter == DrafterChoice::block || s.drafter == DrafterChoice::mtp;
  if (feature && s.auto_tree) {
    const FeatureCalibration& fc = ctx.feature_calibration;
    p.calibration_path = fc.path;
    p.calibration_found = fc.status == FeatureCalibration::Status::ok;
    if (fc.usable()) {
      if (!fc.note.empty()) p.warnings.push_back(fc.note);
      if (!fc.setup_note.empty()) p.warnings.push_back(fc.setup_note);
      s.auto_tree = false;
      p.timings_source = "calibration";
      p.baseline_ms_per_token = 1000.0 / fc.baseline_tokens_per_s;
      const FeatureConfigResult* best = fc.best();
      if (!best) {
        s.drafter = DrafterChoice::none;  // no measured configuration beat plain decoding
        p.choice.node_budget = 0;
        p.choice.step_ms = p.baseline_ms_per_token;
        return finish();
      }
      const SpecSettings& b = best->settings;
      s.tree = b.tree;
      s.draft_k = std::clamp(b.draft_k, 1, max_nodes);
      s.node_budget = std::clamp(b.node_budget, 1, max_nodes);
      s.depth = std::clamp(b.depth, 1, s.node_budget);
      s.branch = std::clamp(b.branch, 1, kMaxBranch);
      if (s.drafter == DrafterChoice::block) {
        s.draft_k = std::min(s.draft_k, ctx.block_size - 1);
        s.depth = std::min(s.depth, ctx.block_size - 1);
      }
      p.choice.mode = s.tree;
      p.choice.node_budget = s.tree == TreeMode::chain ? s.draft_k : s.node_budget;
      p.choice.depth = s.tree == TreeMode::chain ? s.draft_k : s.depth;
      p.choice.expected_tokens = best->tau > 0 ? best->tau : 1.0;
      p.choice.step_ms = best->tokens_per_s > 0 ? 1000.0 * p.choice.expected_tokens / best->tokens_per_s : 0.0;
      return finish();
    }
    const std::string problem = !fc.problem.empty() ? fc.problem
                                : std::string("no calibration for the ") +
                                      (s.drafter == DrafterChoice::block ? "block drafter" : "MTP head");
    p.warnings.push_back(problem + "; drafting a dynamic tree (node budget " + std::to_string(s.node_budget) +
                         ", depth " + std::to_string(s.depth) + ")");
    s.tree = TreeMode::dynamic;
    s.auto_tree = false;
    return finish();
  }
  if (s.drafter != DrafterChoice::model) {
    const std::string who = s.drafter == DrafterChoice::ngram   ? "the n-gram drafter"
                            : s.drafter == DrafterChoice::block ? "the block drafter"
                                                                : "the MTP drafter";
    if (!s.auto_tree) {
      // Every drafter drafts every shape (TreeBuilder); without its acceptance by rank the
      // optimal shape comes from the prior.
      p.accept_by_rank = prior_accept_by_rank();
      p.acceptance_source = "prior";
      p.warnings.push_back(who + " has no rank calibration: its optimal tree is shaped by the prior acceptance " +
                           kPriorText);
      p.shape = sequoia_tree(p.accept_by_rank, s.node_budget, s.depth);
      return finish();
    }
    // An automatic tree needs measured acceptance and timings of this drafter.
    p.warnings.push_back(who + " has no rank calibration: drafting a dynamic tree (node budget " +
                         std::to_string(s.node_budget) + ", depth " + std::to_string(s.depth) +
                         ") instead of an automatic tree");
    s.tree = TreeMode::dynamic;
    s.auto_tree = false;
    return finish();
  }

  // The model drafter: the calibration's acceptance vector, or THE fallback (the prior).
  const Calibration& cal = ctx.calibration;
  p.calibration_path = cal.path;
  p.calibration_found = cal.status == Calibration::Status::ok;
  if (!cal.note.empty()) p.warnings.push_back(cal.note);
  if (cal.has_acceptance()) {
    p.accept_by_rank = cal.accept_by_rank;
    p.acceptance_source = "calibration";
  } else {
    p.accept_by_rank = prior_accept_by_rank();
    p.acceptance_source = "fallback";
    p.warnings.push_back((cal.problem.empty() ? std::string("no calibration") : cal.problem) +
                         "; using the prior acceptance " + kPriorText);
  }

  // The calibration's rank paths, when it recorded them, value trees better than the vector
  // alone (engine/speculative/rank_paths.h).
  const std::unique_ptr<RankPathModel> paths =
      p.acceptance_source == "calibration"
          ? try_rank_path_model(cal.rank_paths, static_cast<int>(p.accept_by_rank.size()), kRankPathMaxDepth)
          : nullptr;
  p.acceptance_model = paths ? "rank paths" : "independent ranks";
  if (!paths && p.acceptance_source == "calibration" && (cal.rank_paths_recorded || !cal.rank_paths.empty())) {
    p.warnings.push_back("the calibration's rank paths are not used (fewer than " + std::to_string(kMinRankPathStarts) +
                         " ranks, malformed, not matching its acceptance counts, or too varied): planning from its acceptance vector");
  }
  if (!s.auto_tree) {
    p.shape = paths ? paths->best_tree(s.node_budget, s.depth) : sequoia_tree(p.accept_by_rank, s.node_budget, s.depth);
    // Say what runs: the tree can be smaller than the budget (paths seen fewer than twice, or
    // deeper than kRankPathMaxDepth, are not planned; Sequoia leaves out nodes that add nothing)
    // and shallower than the depth allowed.
    if (p.shape.size() == 0) {
      p.warnings.push_back("the optimal tree for this calibration is empty (no drafted token was ever accepted): "
                           "plain decoding");
      s.drafter = DrafterChoice::none;
      return finish();
    }
    if (p.shape.size() < s.node_budget) {
      p.warnings.push_back(std::string(paths ? "the calibration's rank paths fill " : "the optimal tree has ") +
                           std::to_string(p.shape.size()) + " of the " + std::to_string(s.node_budget) +
                           " nodes (" +
                           (paths ? "no other path within depth " + std::to_string(std::min(s.depth, kRankPathMaxDepth)) +
                                        " was accepted twice in calibration"
                                  : std::string("more would add nothing at this acceptance and depth")) +
                           "): drafting " + std::to_string(p.shape.size()));
      s.node_budget = p.shape.size();
    }
    s.depth = p.shape.max_depth();
    return finish();
  }

  // Auto: N, D and the shape minimising the modelled time per token (Sequoia §3.3).
  StepTimings t = cal.timings;
  p.timings_source = cal.timings_cached ? "cache" : "calibration";
  if (!t.valid()) {
    p.timings_source = "measured";
    if (ctx.measure_timings) t = ctx.measure_timings();
    if (!t.valid()) throw std::runtime_error("--tree auto: could not time the models on this context");
  }
  const int max_auto = std::min({kCalibrationMaxAutoNodes, max_nodes, t.verify_nodes.back()});
  const SequoiaPlanner planner(p.accept_by_rank, max_auto, max_auto);
  p.choice = choose_budget(planner, t, max_auto, max_auto, paths.get());
  p.baseline_ms_per_token = t.t_verify(0);
  s.auto_tree = false;
  if (p.choice.node_budget == 0) {
    s.drafter = DrafterChoice::none;  // drafting does not pay on these numbers: plain decoding
  } else if (p.choice.mode == TreeMode::chain) {
    s.tree = TreeMode::chain;
    s.draft_k = s.node_budget = p.choice.node_budget;
    s.depth = p.choice.depth;
  } else {
    s.tree = TreeMode::optimal;
    s.node_budget = p.choice.node_budget;
    s.depth = p.choice.depth;
    p.shape = p.choice.shape;
  }
  return finish();
}

TreePlan RequestPlanner::plan_tree(const SpecSettings& s, std::span<const int32_t> prompt) const {
  PlanContext ctx;
  LlamaModel& target = *pair_.target;
  LlamaModel* draft = pair_.draft.get();
  ctx.has_draft_model = draft != nullptr;
  ctx.block_size = features_.block_size;
  ctx.has_mtp = features_.mtp;
  if (s.auto_tree && s.drafts() && (s.drafter == DrafterChoice::block || s.drafter == DrafterChoice::mtp)) {
    const std::string& path = s.drafter == DrafterChoice::block ? features_.block_path : features_.mtp_path;
    if (!path.empty()) {
      ctx.feature_calibration = load_feature_calibration(target.path(), path, s.drafter, timing_setup_of(target, threads_));
    }
  }
  ctx.max_nodes = std::max(1, target.max_batch() - 1);
  const bool calibrated = s.drafts() && s.drafter == DrafterChoice::model && draft &&
                          (s.auto_tree || s.tree == TreeMode::optimal);
  const TimingSetup setup = timing_setup_of(target, threads_);
  if (calibrated) ctx.calibration = load_calibration(target.path(), draft->path(), setup);
  std::string cache_warning;
  if (calibrated && s.auto_tree) {
    ctx.measure_timings = [&]() {
      // Without a prompt (the app plans from its settings) the models are timed on BOS repeated:
      // a forward's cost does not depend on which ids it reads.
      std::vector<int32_t> p(prompt.begin(), prompt.end());
      if (p.empty()) {
        const int32_t bos = target.vocab().bos_id;
        p.push_back(bos >= 0 && bos < target.config().n_vocab ? bos : 0);
      }
      const std::vector<int32_t> tctx = calibration_timing_context(p, target.n_ctx());
      if (tctx.empty()) return StepTimings{};
      constexpr int kReps = 5;  // a quick measurement on the request's path (about 0.1 s); calibrate uses more
      double disorder = 1.0;
      StepTimings t = measure_step_timings(target, draft, tctx, calibration_verify_nodes(),
                                           calibration_draft_widths(), kReps, &disorder);
      if (!t.valid()) return t;
      // Still out of order after the retries: other programs were busy on the cores. Good enough
      // for this run; cached with its disorder, so later runs time the models again
      // (calibration_timings_from_json) instead of planning from one disturbed measurement.
      if (disorder > kTimingNoiseRatio) {
        char ratio[32];
        std::snprintf(ratio, sizeof ratio, "%.2f", disorder);
        cache_warning = std::string("the timings were disturbed (a size measured ") + ratio +
                        "x a larger one: other programs busy on the cores?): used for this run only; the next "
                        "run times the models again";
      }
      // A context too small for the largest verification (--ctx) gives a partial table: good
      // for this run, but cached it would bound every later run's auto trees to its nodes.
      if (t.verify_nodes.back() < calibration_verify_nodes().back()) {
        cache_warning = "the context (" + std::to_string(target.n_ctx()) + " tokens) is too small to time " +
                        std::to_string(calibration_verify_nodes().back()) +
                        "-node verifications: these timings are used for this run only, not cached";
        return t;
      }
      try {
        cache_calibration_timings(target.path(), draft->path(), t, setup, static_cast<int>(tctx.size()), kReps,
                                  disorder);
      } catch (const std::exception& e) {
        cache_warning = std::string("could not cache the timings: ") + e.what();
      }
      return t;
    };
  }
  TreePlan plan = plan_tree(s, ctx);
  if (!cache_warning.empty()) plan.warnings.push_back(cache_warning);
  return plan;
}

// ---- compare runs ---------------------------------------------------------------------------

long RequestPlanner::first_difference(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<long>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<long>(n);
}

CompareOutcome RequestPlanner::compare(const CompareRun& baseline, const CompareRun& speculative) {
  CompareOutcome o;
  o.first_diff = first_difference(baseline.tokens, speculative.tokens);
  o.identical = o.first_diff < 0;
  const double base = baseline.stats.tokens_per_s(), spec = speculative.stats.tokens_per_s();
  o.speedup_decode = base > 0 && spec > 0 ? spec / base : 0.0;
  o.total_time_ratio =
      baseline.total_ms > 0 && speculative.total_ms > 0 ? baseline.total_ms / speculative.total_ms : 0.0;
  return o;
}

}  // namespace specchat

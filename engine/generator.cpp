#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/model.h"
#include "engine/speculative/acceptance.h"
#include "engine/speculative/drafter.h"
#include "engine/speculative/ngram_drafter.h"
#include "engine/utf8.h"

namespace specchat {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::length: return "length";
    case FinishReason::eos: return "eos";
    case FinishReason::stop: return "stop";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::context_full: return "context_full";
  }
  return "unknown";
}

const char* drafter_kind_name(DrafterKind k) { return k == DrafterKind::ngram ? "ngram" : "model"; }

TreeBudget SpecConfig::effective_budget() const {
  TreeBudget b = tree;
  if (b.mode == TreeMode::chain) {
    b.node_budget = draft_k;
    b.depth = draft_k;
    b.branch = 1;
  }
  return b;
}

double GenerationStats::tokens_per_s() const {
  return decode_ms > 0 && n_generated > 0 ? n_generated / (decode_ms / 1000.0) : 0.0;
}
double GenerationStats::tpot_ms() const { return n_generated > 0 ? decode_ms / n_generated : 0.0; }
double GenerationStats::acceptance_rate() const {
  return n_drafted > 0 ? static_cast<double>(n_accepted) / n_drafted : 0.0;
}
double GenerationStats::mean_accepted_length() const {
  return n_steps > 0 ? static_cast<double>(n_generated) / n_steps : 0.0;
}

struct Generator::State {
  std::unique_ptr<ModelDrafter> model_drafter;
  NgramDrafter ngram_drafter;
};

Generator::Generator(LlamaModel& target, LlamaModel* draft)
    : target_(target), draft_(draft), st_(std::make_unique<State>()) {
  if (draft_) st_->model_drafter = std::make_unique<ModelDrafter>(*draft_);
}

Generator::~Generator() = default;

namespace {

// Emits tokens in order and applies the stop rules (FAULT-KINDS B07, B09, B10, B17): the first
// of EOS/EOT, a stop string, or N reached ends generation; nothing after it is kept. Text is
// released only when it is complete UTF-8 and cannot be the start of a stop string.
class Emitter {
 public:
  Emitter(const Vocab& vocab, const GenerateRequest& req, const TokenCallback& cb, GenerationResult& res)
      : vocab_(vocab), req_(req), cb_(cb), res_(res) {}

  // Returns false when generation must end (res_.finish set).
  bool push(int32_t id, bool drafted, int step) {
    if (static_cast<int>(res_.tokens.size()) >= req_.max_tokens) {
      res_.finish = FinishReason::length;
      return false;
    }
    if (vocab_.is_eog(id)) {
      res_.finish = FinishReason::eos;
      return false;
    }
    const size_t start = text_.size();
    text_ += vocab_.token_bytes(id);
    // A stop string ends generation: tokens that reach into it are dropped.
    for (const std::string& s : req_.stop_strings) {
      if (s.empty()) continue;
      const size_t from = start >= s.size() ? start - s.size() + 1 : 0;
      const size_t at = text_.find(s, from);
      if (at != std::string::npos) {
        text_.resize(start);
        // Drop earlier kept tokens whose bytes reach into the stop string.
        while (!ends_.empty() && ends_.back() > at) {
          ends_.pop_back();
          res_.tokens.pop_back();
          if (res_.drafted.back() != 0) --res_.stats.n_accepted;
          res_.drafted.pop_back();
          steps_.pop_back();
        }
        res_.stats.n_generated = static_cast<int>(res_.tokens.size());
        text_.resize(ends_.empty() ? 0 : ends_.back());
        res_.finish = FinishReason::stop;
        return false;
      }
    }
    res_.tokens.push_back(id);
    res_.drafted.push_back(drafted ? 1 : 0);
    res_.stats.n_generated = static_cast<int>(res_.tokens.size());
    if (drafted) ++res_.stats.n_accepted;
    steps_.push_back(step);
    ends_.push_back(text_.size());
    release(false);
    if (static_cast<int>(res_.tokens.size()) >= req_.max_tokens) {
      res_.finish = FinishReason::length;
      return false;
    }
    return true;
  }

  // Flushes held-back events; the final text sanitises an incomplete UTF-8 tail.
  void finish() {
    release(true);
    res_.text = utf8_sanitize(text_);
  }

 private:
  void release(bool all) {
    size_t safe = text_.size();
    if (!all) {
      safe = utf8_complete_prefix(text_);
      for (const std::string& s : req_.stop_strings) {  // hold back a possible stop prefix
        for (size_t l = std::min(s.size() - (s.empty() ? 0 : 1), text_.size()); l > 0; --l) {
          if (text_.compare(text_.size() - l, l, s, 0, l) == 0) {
            safe = std::min(safe, text_.size() - l);
            break;
          }
        }
      }
    }
    while (next_event_ < res_.tokens.size() && (all || ends_[next_event_] <= safe)) {
      const size_t end = ends_[next_event_];
      TokenEvent ev;
      ev.id = res_.tokens[next_event_];
      ev.drafted = res_.drafted[next_event_] != 0;
      ev.step = steps_[next_event_];
      ev.stats = &res_.stats;
      ev.text = utf8_sanitize(std::string_view(text_).substr(released_, end - released_));
      released_ = end;
      ++next_event_;
      if (cb_) cb_(ev);
    }
  }

  const Vocab& vocab_;
  const GenerateRequest& req_;
  const TokenCallback& cb_;
  GenerationResult& res_;
  std::string text_;
  std::vector<size_t> ends_;  // byte end of each kept token in text_
  std::vector<int> steps_;
  size_t next_event_ = 0, released_ = 0;
};

}  // namespace

GenerationResult Generator::generate(const GenerateRequest& req, const TokenCallback& on_token,
                                     const std::atomic<bool>* cancel) {
  const auto t_start = Clock::now();
  const int n_ctx = target_.n_ctx();
  const int n_prompt = static_cast<int>(req.prompt.size());
  if (n_prompt == 0) {
    throw GenerationError("empty_prompt", "the prompt has no tokens");
  }
  if (n_prompt > n_ctx) {
    throw GenerationError("prompt_too_long", "prompt has " + std::to_string(n_prompt) +
                                                 " tokens, context is " + std::to_string(n_ctx));
  }
  for (int32_t t : req.prompt) {
    if (t < 0 || t >= target_.config().n_vocab) {
      throw GenerationError("bad_token", "prompt token id " + std::to_string(t) + " out of range");
    }
  }
  GenerationResult res;
  GenerationStats& st = res.stats;
  st.n_prompt = n_prompt;
  // The drafter of this request: none when draft_k is 0, or the model drafter has no model.
  Drafter* drafter = nullptr;
  if (req.spec.draft_k > 0) {
    if (req.spec.drafter == DrafterKind::ngram) drafter = &st_->ngram_drafter;
    else if (st_->model_drafter) drafter = st_->model_drafter.get();
  }
  const TreeBudget budget = req.spec.effective_budget();
  st.accepted_hist.assign(static_cast<size_t>(drafter ? std::max(1, budget.depth) : 0) + 1, 0);
  Rng rng(req.sampling.seed);
  RngChoices choices(rng);
  std::vector<int32_t> ctx = req.prompt;
  ctx.reserve(ctx.size() + static_cast<size_t>(std::max(0, req.max_tokens)) + 1);

  // The target's cache holds all of ctx but the last token, which each step's verification
  // batch starts with.
  st.n_prompt_cached = std::min(target_.kv().common_prefix(ctx), n_prompt - 1);
  if (n_prompt > 1) target_.sync_cache(ctx, n_prompt - 1, false);
  else target_.kv().truncate(0);
  if (drafter) drafter->sync(ctx);
  st.prefill_ms = ms_since(t_start);
  const auto t_decode = Clock::now();

  Emitter em(target_.vocab(), req, on_token, res);
  bool running = req.max_tokens > 0;
  if (!running) res.finish = FinishReason::length;
  std::vector<Distribution> p;
  Batch verify;
  while (running) {
    if (cancel && cancel->load()) {
      res.finish = FinishReason::cancelled;
      break;
    }
    const int n = static_cast<int>(ctx.size());
    if (n > n_ctx) {  // the last token has no KV slot left
      res.finish = FinishReason::context_full;
      break;
    }
    // Propose: at most n_ctx - n nodes fit behind the last token, and at most max_batch - 1
    // in one verification forward.
    auto t0 = Clock::now();
    DraftTree tree;
    const int room = std::min(n_ctx - n, target_.max_batch() - 1);
    if (drafter && room > 0) tree = drafter->propose(ctx, budget, room, req.sampling, rng);
    st.draft_ms += ms_since(t0);
    if (drafter && tree.empty()) ++st.n_empty_drafts;
    const int n_nodes = tree.size();
    st.n_drafted += n_nodes;

    // Verify: one target forward over [last committed token, tree nodes] with tree attention.
    t0 = Clock::now();
    verify.tokens.assign(1, ctx.back());
    verify.pos.assign(1, n - 1);
    verify.parent.assign(1, -1);
    verify.out_rows.assign(1, 0);
    verify.kv_pos0 = n - 1;
    for (int i = 0; i < n_nodes; ++i) {
      const DraftNode& nd = tree.nodes[static_cast<size_t>(i)];
      verify.tokens.push_back(nd.token);
      verify.pos.push_back(n - 1 + nd.depth);
      verify.parent.push_back(nd.parent + 1);
      verify.out_rows.push_back(i + 1);
    }
    const std::span<const float> logits = target_.forward(verify);
    st.verify_ms += ms_since(t0);
    // NaN/inf weights or activations make every comparison false and argmax silently 0.
    if (!std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); })) {
      throw GenerationError("non_finite_logits", "the target model produced NaN or infinite logits (" +
                                                     target_.path() + "): the weights are damaged");
    }
    ++st.n_steps;

    // Accept.
    t0 = Clock::now();
    const size_t nv = static_cast<size_t>(target_.config().n_vocab);
    p.clear();
    for (int i = 0; i <= n_nodes; ++i) {
      p.push_back(process_logits(logits.subspan(static_cast<size_t>(i) * nv, nv), req.sampling));
    }
    const TreeOutcome out = accept_tree(tree, p, req.sampling.greedy(), choices);
    const int n_acc = static_cast<int>(out.path.size());
    if (static_cast<size_t>(n_acc) < st.accepted_hist.size()) st.accepted_hist[static_cast<size_t>(n_acc)]++;
    st.sample_ms += ms_since(t0);

    // Commit: the target's cache keeps [last, accepted path] (rows moved into place); the new
    // last token is fed by the next step.
    std::vector<int32_t> keep_rows(1, 0), keep_ids(1, ctx.back());
    for (int32_t v : out.path) {
      keep_rows.push_back(v + 1);
      keep_ids.push_back(tree.nodes[static_cast<size_t>(v)].token);
    }
    target_.kv().keep_path(keep_rows, keep_ids);
    if (drafter) drafter->accepted(tree, out.path);
    const int step = st.n_steps - 1;
    st.decode_ms = ms_since(t_decode);  // running value for TokenEvent::stats
    for (int i = 0; i <= n_acc && running; ++i) {
      const bool drafted = i < n_acc;
      const int32_t id = drafted ? keep_ids[static_cast<size_t>(i) + 1] : out.next_token;
      const size_t before = res.tokens.size();
      running = em.push(id, drafted, step);
      if (res.tokens.size() > before) ctx.push_back(id);
    }
    if (st.ttft_ms == 0 && !res.tokens.empty()) st.ttft_ms = ms_since(t_start);
  }
  em.finish();
  st.n_generated = static_cast<int>(res.tokens.size());
  st.n_accepted = 0;
  for (uint8_t d : res.drafted) st.n_accepted += d;
  st.decode_ms = ms_since(t_decode);
  if (st.ttft_ms == 0) st.ttft_ms = ms_since(t_start);
  // Keep in the caches exactly the prompt and the kept tokens (nothing past a stop or EOS).
  std::vector<int32_t> final_ctx = req.prompt;
  final_ctx.insert(final_ctx.end(), res.tokens.begin(), res.tokens.end());
  target_.kv().truncate(target_.kv().common_prefix(final_ctx));
  if (draft_) draft_->kv().truncate(draft_->kv().common_prefix(final_ctx));
  return res;
}

}  // namespace specchat

// Engine plumbing for drafters that read the target's hidden states
// (docs/design/target-feature-drafters.md, "Context features"). A fake feature drafter records
// every observe() and, on each proposal for a context of n tokens, checks that it holds exactly
// the rows of ctx[0, n − 1) and that they equal the target's hidden states of those tokens as
// one separate prefill on a second LlamaModel instance computes them. Its drafts are trees built
// around the known greedy continuation (a wrong sibling beside each right token, in random
// order, cut at a random depth), so the accepted length varies from 0 to the whole tree and the
// accepted path's rows are not contiguous in the verification batch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>

#include "engine/model.h"
#include "engine/model_fixture.h"
#include "engine/runtime/engine.h"

using namespace specchat;

namespace {

// The target's hidden states of a token prefix from an empty cache, in one forward (a second
// model instance: nothing is shared with the engine's).
class Reference {
 public:
  Reference() {
    LlamaModel::Options o;
    o.max_batch = 512;
    m_ = LlamaModel::load(test::target_model(), o);
  }
  LlamaModel& model() { return *m_; }
  // [taps, toks.size(), d_model]
  std::vector<float> hidden(std::span<const int32_t> toks, std::span<const int32_t> taps) {
    m_->kv(0).truncate(0);
    Batch b = Batch::chain(toks, 0, true);
    const Batch* one[1] = {&b};
    const ForwardOut o = m_->forward(one, taps);
    std::vector<float> h(o.hidden.begin(), o.hidden.end());
    m_->kv(0).truncate(0);
    return h;
  }

 private:
  std::unique_ptr<LlamaModel> m_;
};

struct Checks {
  int proposals = 0;      // propose() calls
  int row_checks = 0;     // times the rows were compared with the reference
  int unsynced = 0;       // proposals without exactly n − 1 rows (the engine must prevent them)
  int token_errors = 0;   // rows whose token or successor disagrees with the context
  double max_diff = 0;    // largest |row − reference| seen
  std::vector<std::pair<int, int>> observes;  // (pos0, n_rows) of every observe()
};

class FakeFeatureDrafter : public Drafter {
 public:
  FakeFeatureDrafter(std::vector<int32_t> taps, int d_model, int n_vocab, Reference& ref, uint64_t seed)
      : taps_(std::move(taps)), d_(d_model), n_vocab_(n_vocab), ref_(ref), gen_(seed) {}

  std::vector<int32_t> target_taps() const override { return taps_; }
  int n_observed() const override { return static_cast<int>(tok_.size()); }
  void sync(std::span<const int32_t> ctx) override { cut(ctx); }
  void finished(std::span<const int32_t> ctx) override { cut(ctx); }
  void clear() override { cut({}); }

  void observe(int pos0, std::span<const int32_t> tokens, const HiddenRows& h) override {
    if (pos0 != n_observed()) throw std::invalid_argument("observe: gap");
    if (tokens.size() != static_cast<size_t>(h.n_rows) + 1 || h.d_model != d_ || h.n_rows <= 0) {
      throw std::invalid_argument("observe: sizes");
    }
    for (int r = 0; r < h.n_rows; ++r) {
      tok_.push_back(tokens[static_cast<size_t>(r)]);
      succ_.push_back(tokens[static_cast<size_t>(r) + 1]);
      for (int32_t t : taps_) {
        const int i = h.index_of(t);
        if (i < 0) throw std::invalid_argument("observe: a tap is missing");
        rows_.insert(rows_.end(), h.row(i, r), h.row(i, r) + d_);
      }
    }
    checks.observes.emplace_back(pos0, h.n_rows);
  }

  DraftTree propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes, const SamplingParams&,
                    Rng&) override {
    ++checks.proposals;
    if (n_observed() != static_cast<int>(ctx.size()) - 1) {
      ++checks.unsynced;
      return {};
    }
    check_rows(ctx);
    return guess(ctx, std::min(budget.depth, max_nodes / 2));
  }

  // Compares the rows held with the reference's for ctx[0, n_observed()) (one prefill), and
  // their tokens and successors with ctx (needs n_observed() < ctx.size()).
  void check_rows(std::span<const int32_t> ctx) {
    const int m = n_observed();
    if (m == 0) return;
    if (m >= static_cast<int>(ctx.size())) {
      ++checks.token_errors;
      return;
    }
    for (int i = 0; i < m; ++i) {
      if (tok_[static_cast<size_t>(i)] != ctx[static_cast<size_t>(i)] ||
          succ_[static_cast<size_t>(i)] != ctx[static_cast<size_t>(i) + 1]) {
        ++checks.token_errors;
      }
    }
    const std::vector<float> want = ref_.hidden(ctx.first(static_cast<size_t>(m)), taps_);
    const size_t d = static_cast<size_t>(d_), nt = taps_.size();
    for (size_t t = 0; t < nt; ++t) {
      for (size_t i = 0; i < static_cast<size_t>(m); ++i) {
        const float* got = rows_.data() + (i * nt + t) * d;
        const float* ref = want.data() + (t * static_cast<size_t>(m) + i) * d;
        for (size_t j = 0; j < d; ++j) checks.max_diff = std::max(checks.max_diff, std::fabs(double(got[j]) - ref[j]));
      }
    }
    ++checks.row_checks;
  }

  std::vector<int32_t> truth;  // prompt + the greedy reply (what the target will accept)
  bool always_right = false;   // draft only right tokens, as deep as allowed
  Checks checks;

 private:
  // Keeps the rows of the longest prefix whose tokens and successors agree with ctx.
  void cut(std::span<const int32_t> ctx) {
    size_t keep = 0;
    while (keep < tok_.size() && keep + 1 < ctx.size() && tok_[keep] == ctx[keep] && succ_[keep] == ctx[keep + 1]) {
      ++keep;
    }
    tok_.resize(keep);
    succ_.resize(keep);
    rows_.resize(keep * taps_.size() * static_cast<size_t>(d_));
  }

  // Right tokens (from truth) to a random depth, each with a wrong sibling before or after it,
  // then one wrong token.
  DraftTree guess(std::span<const int32_t> ctx, int k) {
    DraftTree t;
    const size_t n = ctx.size();
    if (truth.size() <= n || !std::equal(ctx.begin(), ctx.end(), truth.begin())) return t;
    k = std::min(k, static_cast<int>(truth.size() - n));
    if (k <= 0) return t;
    const int good = always_right ? k : std::uniform_int_distribution<int>(0, k)(gen_);
    int32_t parent = -1;
    for (int j = 1; j <= k; ++j) {
      const int32_t right = truth[n - 1 + static_cast<size_t>(j)];
      const int32_t wrong = (right + 1 + static_cast<int32_t>(gen_() % 97)) % n_vocab_;
      if (j > good) {
        t.add(wrong, parent, 0.0);
        break;
      }
      const bool wrong_first = !always_right && (gen_() & 1u);
      if (wrong_first) t.add(wrong, parent, 0.0);
      const int32_t r = t.add(right, parent, 0.0);
      if (!wrong_first && !always_right) t.add(wrong, parent, 0.0);
      parent = r;
    }
    return t;
  }

  std::vector<int32_t> taps_;
  int d_, n_vocab_;
  Reference& ref_;
  std::mt19937_64 gen_;
  std::vector<int32_t> tok_, succ_;  // [rows] token of each row and its successor
  std::vector<float> rows_;          // [rows, taps, d_model]
};

// The target (KV pool of n_seq), an engine over it with fake block and MTP drafters installed,
// and the reference instance.
struct Rig {
  explicit Rig(int n_seq) {
    PairOptions o;
    o.target_path = test::target_model();
    o.n_seq = n_seq;
    pair = ModelPair::load(o);
    engine = std::make_unique<Engine>(*pair.target, nullptr);
    const int d_model = pair.target->config().d_model, n_vocab = pair.target->config().n_vocab;
    // Block: an early layer and the final norm; MTP: the last layer (as the real ones read).
    block_taps = {1, kHiddenFinalNorm};
    mtp_taps = {pair.target->config().n_layer - 1};
    block.resize(static_cast<size_t>(n_seq));
    mtp.resize(static_cast<size_t>(n_seq));
    engine->set_drafter_factory(DrafterKind::block, [this, d_model, n_vocab](int slot) -> std::unique_ptr<Drafter> {
      auto d = std::make_unique<FakeFeatureDrafter>(block_taps, d_model, n_vocab, ref, 100 + slot);
      block[static_cast<size_t>(slot)] = d.get();
      return d;
    });
    engine->set_drafter_factory(DrafterKind::mtp, [this, d_model, n_vocab](int slot) -> std::unique_ptr<Drafter> {
      auto d = std::make_unique<FakeFeatureDrafter>(mtp_taps, d_model, n_vocab, ref, 200 + slot);
      mtp[static_cast<size_t>(slot)] = d.get();
      return d;
    });
  }
  // Greedy baseline of `req` (no drafter) on the reference instance.
  GenerationResult baseline(GenerateRequest req) {
    req.spec.draft_k = 0;
    Generator g(ref.model(), nullptr);
    return g.generate(req);
  }
  // Runs one request to its end.
  GenerationResult run(const GenerateRequest& req) {
    const Engine::SeqId id = engine->submit(req);
    engine->run_until_finished(id);
    return engine->take(id);
  }
  // The drafter of `kind` that served the last request (the one of the slot used).
  FakeFeatureDrafter& used(std::vector<FakeFeatureDrafter*>& v, int proposals_before = 0) {
    for (FakeFeatureDrafter* d : v) {
      if (d->checks.proposals > proposals_before) return *d;
    }
    FAIL("no drafter of this kind proposed anything");
    return *v.front();
  }
  Reference ref;
  ModelPair pair;
  std::unique_ptr<Engine> engine;
  std::vector<int32_t> block_taps, mtp_taps;
  std::vector<FakeFeatureDrafter*> block, mtp;
};

GenerateRequest request(Rig& rig, const std::string& prompt, DrafterKind kind, int max_tokens) {
  GenerateRequest r;
  r.prompt = rig.pair.encode_prompt(prompt);
  r.max_tokens = max_tokens;
  r.spec.draft_k = 5;
  r.spec.drafter = kind;
  r.spec.tree.mode = TreeMode::dynamic;
  r.spec.tree.node_budget = 12;
  r.spec.tree.depth = 5;
  return r;
}

std::vector<int32_t> with_reply(const GenerateRequest& req, const GenerationResult& r) {
  std::vector<int32_t> v = req.prompt;
  v.insert(v.end(), r.tokens.begin(), r.tokens.end());
  return v;
}

// Every proposal saw exactly the committed rows, equal to the reference (one F32 forward of the
// same kernels on the same rows: batch-invariant, so exact; 1e-6 allows a last-bit change only).
void check_clean(const FakeFeatureDrafter& d, int min_proposals) {
  const Checks& c = d.checks;
  INFO("proposals " << c.proposals << ", row checks " << c.row_checks << ", max diff " << c.max_diff);
  CHECK(c.proposals >= min_proposals);
  CHECK(c.unsynced == 0);
  CHECK(c.token_errors == 0);
  CHECK(c.row_checks >= min_proposals);
  CHECK(c.max_diff <= 1e-6);
}

// After a request: the drafter holds no row past the final context, and what it holds is right.
void check_final(FakeFeatureDrafter& d, const std::vector<int32_t>& final_ctx) {
  CHECK(d.n_observed() <= static_cast<int>(final_ctx.size()) - 1);
  const int errors = d.checks.token_errors;
  d.check_rows(final_ctx);
  CHECK(d.checks.token_errors == errors);
  CHECK(d.checks.max_diff <= 1e-6);
}

}  // namespace

TEST_CASE("feature drafters: every committed row's hidden states, two kinds in one verification batch",
          "[model][engine][features]") {
  Rig rig(2);
  GenerateRequest a = request(rig, "Once upon a time, there was a little fox who", DrafterKind::block, 96);
  GenerateRequest b = request(rig, "One day, a boy named Tom went to the park and", DrafterKind::mtp, 80);
  const GenerationResult base_a = rig.baseline(a), base_b = rig.baseline(b);
  // Both kinds in both slots know both continuations: whichever slot a request lands in.
  for (FakeFeatureDrafter* d : rig.block) d->truth = with_reply(a, base_a);
  for (FakeFeatureDrafter* d : rig.mtp) d->truth = with_reply(b, base_b);
  const Engine::SeqId ia = rig.engine->submit(a);
  const Engine::SeqId ib = rig.engine->submit(b);
  while (!rig.engine->finished(ia) || !rig.engine->finished(ib)) rig.engine->step();
  const GenerationResult ra = rig.engine->take(ia), rb = rig.engine->take(ib);
  // Lossless: the same tokens as plain greedy decoding.
  CHECK(ra.tokens == base_a.tokens);
  CHECK(rb.tokens == base_b.tokens);
  FakeFeatureDrafter& da = rig.used(rig.block);
  FakeFeatureDrafter& db = rig.used(rig.mtp);
  check_clean(da, 20);
  check_clean(db, 20);
  // Accepted lengths varied (0 … depth), so rows came in groups of every size.
  for (const GenerationResult* r : {&ra, &rb}) {
    int bins = 0;
    for (int h : r->stats.accepted_hist) bins += h > 0 ? 1 : 0;
    INFO("accepted_hist bins used " << bins);
    CHECK(bins >= 3);
    CHECK(r->stats.n_accepted > 0);
  }
  std::set<int> sizes;
  for (const auto& [pos0, n] : da.checks.observes) sizes.insert(n);
  CHECK(sizes.size() >= 3);
  check_final(da, with_reply(a, ra));
  check_final(db, with_reply(b, rb));
}

TEST_CASE("feature drafters: a second turn keeps the rows of the shared prefix, a switched drafter is re-fed",
          "[model][engine][features]") {
  Rig rig(1);
  FakeFeatureDrafter& d = *rig.block[0];
  GenerateRequest t1 = request(rig, "Tom had a red ball. He", DrafterKind::block, 24);
  const GenerationResult b1 = rig.baseline(t1);
  d.truth = with_reply(t1, b1);
  const GenerationResult r1 = rig.run(t1);
  REQUIRE(r1.tokens == b1.tokens);
  const std::vector<int32_t> final1 = with_reply(t1, r1);

  // Turn 2 continues the conversation: only the new rows are fed.
  GenerateRequest t2 = t1;
  t2.prompt = final1;
  const std::vector<int32_t> more = rig.pair.encode_prompt(" Then the dog");
  t2.prompt.insert(t2.prompt.end(), more.begin() + (more.front() == rig.pair.target->vocab().bos_id ? 1 : 0), more.end());
  const GenerationResult b2 = rig.baseline(t2);
  d.truth = with_reply(t2, b2);
  const size_t obs_before = d.checks.observes.size();
  const int proposals_before = d.checks.proposals;
  const Engine::SeqId i2 = rig.engine->submit(t2);
  REQUIRE(d.checks.observes.size() > obs_before);
  const int first_new = d.checks.observes[obs_before].first;
  INFO("turn 2 prefill starts at row " << first_new << " of " << t2.prompt.size());
  CHECK(first_new >= static_cast<int>(final1.size()) - 2);
  rig.engine->run_until_finished(i2);
  const GenerationResult r2 = rig.engine->take(i2);
  CHECK(r2.tokens == b2.tokens);
  CHECK(r2.stats.n_prompt_cached >= static_cast<int>(final1.size()) - 2);
  CHECK(d.checks.proposals > proposals_before);
  check_clean(d, 4);
  check_final(d, with_reply(t2, r2));

  // Turn 3 runs with the n-gram drafter (the block drafter is not fed), turn 4 with the block
  // drafter again: the target's cache holds more than the drafter, which is re-fed from its
  // own length (the rows of turn 2 it kept).
  GenerateRequest t3 = t2;
  t3.prompt = with_reply(t2, r2);
  t3.spec.drafter = DrafterKind::ngram;
  const GenerationResult r3 = rig.run(t3);
  const int rows_kept = d.n_observed();
  GenerateRequest t4 = t3;
  t4.prompt = with_reply(t3, r3);
  t4.spec.drafter = DrafterKind::block;
  const GenerationResult b4 = rig.baseline(t4);
  d.truth = with_reply(t4, b4);
  const size_t obs3 = d.checks.observes.size();
  const Engine::SeqId i4 = rig.engine->submit(t4);
  REQUIRE(d.checks.observes.size() > obs3);
  CHECK(d.checks.observes[obs3].first == rows_kept);
  CHECK(d.n_observed() == static_cast<int>(t4.prompt.size()) - 1);
  rig.engine->run_until_finished(i4);
  const GenerationResult r4 = rig.engine->take(i4);
  CHECK(r4.tokens == b4.tokens);
  CHECK(r4.stats.n_prompt_cached == std::min(rows_kept, static_cast<int>(t4.prompt.size()) - 1));
  check_clean(d, 4);
  check_final(d, with_reply(t4, r4));

  // A cold cache forgets the rows too.
  rig.engine->clear_cache();
  CHECK(d.n_observed() == 0);
}

TEST_CASE("feature drafters: a stop mid-step leaves no row past the committed context", "[model][engine][features]") {
  Rig rig(1);
  FakeFeatureDrafter& d = *rig.block[0];
  d.always_right = true;  // whole trees accepted: the stop falls inside a step
  SECTION("max_tokens") {
    GenerateRequest r = request(rig, "Once upon a time", DrafterKind::block, 3);
    const GenerationResult base = rig.baseline(r);
    GenerateRequest longer = r;
    longer.max_tokens = 16;
    d.truth = with_reply(r, rig.baseline(longer));
    const GenerationResult got = rig.run(r);
    CHECK(got.tokens == base.tokens);
    CHECK(got.stats.n_steps == 1);  // one step accepted more than max_tokens allowed
    check_clean(d, 1);
    check_final(d, with_reply(r, got));
  }
  SECTION("stop string spanning tokens") {
    GenerateRequest r = request(rig, "Once upon a time, there was a little", DrafterKind::block, 40);
    const GenerationResult full = rig.baseline(r);
    REQUIRE(full.tokens.size() >= 12);
    d.truth = with_reply(r, full);
    // The text of two reply tokens: when the second arrives the first is taken back too.
    const Vocab& v = rig.pair.target->vocab();
    const std::string stop = v.token_bytes(full.tokens[8]) + v.token_bytes(full.tokens[9]);
    REQUIRE(stop.size() >= 2);
    r.stop_strings = {stop};
    const GenerationResult base = rig.baseline(r);
    const GenerationResult got = rig.run(r);
    CHECK(got.finish == FinishReason::stop);
    CHECK(got.tokens == base.tokens);
    check_clean(d, 1);
    check_final(d, with_reply(r, got));
    // The next request on the slot starts from rows that agree with what was kept.
    GenerateRequest next = r;
    next.stop_strings.clear();
    next.prompt = with_reply(r, got);
    next.max_tokens = 8;
    const GenerationResult bn = rig.baseline(next);
    d.truth = with_reply(next, bn);
    d.always_right = false;
    const GenerationResult gn = rig.run(next);
    CHECK(gn.tokens == bn.tokens);
    check_clean(d, 2);
  }
}

TEST_CASE("feature drafters: drafting switched off and on again", "[model][engine][features]") {
  Rig rig(1);
  FakeFeatureDrafter& d = *rig.block[0];
  GenerateRequest r = request(rig, "The little fox ran into the forest and", DrafterKind::block, 40);
  const GenerationResult base = rig.baseline(r);
  d.truth = with_reply(r, base);
  SECTION("off at submit: caught up when drafting resumes") {
    rig.engine->set_draft_cap(0);
    const Engine::SeqId id = rig.engine->submit(r);
    CHECK(d.n_observed() == 0);  // no hidden-state prefill while drafting is off
    for (int i = 0; i < 4; ++i) rig.engine->step();
    CHECK(d.checks.proposals == 0);
    CHECK(d.checks.observes.empty());  // behind: nothing is appended out of order
    rig.engine->set_draft_cap(-1);
    rig.engine->run_until_finished(id);
    const GenerationResult got = rig.engine->take(id);
    CHECK(got.tokens == base.tokens);
    REQUIRE_FALSE(d.checks.observes.empty());
    CHECK(d.checks.observes.front().first == 0);
    CHECK(d.checks.observes.front().second == static_cast<int>(r.prompt.size()) + 4 - 1);  // the catch-up
    check_clean(d, 4);
    check_final(d, with_reply(r, got));
  }
  SECTION("off mid-request: rows keep coming, one per plain step") {
    const Engine::SeqId id = rig.engine->submit(r);
    for (int i = 0; i < 3; ++i) rig.engine->step();
    const int proposals = d.checks.proposals;
    const size_t obs = d.checks.observes.size();
    rig.engine->set_draft_cap(0);
    for (int i = 0; i < 4; ++i) rig.engine->step();
    CHECK(d.checks.proposals == proposals);
    REQUIRE(d.checks.observes.size() == obs + 4);
    for (size_t i = obs; i < obs + 4; ++i) CHECK(d.checks.observes[i].second == 1);
    rig.engine->set_draft_cap(-1);
    rig.engine->run_until_finished(id);
    const GenerationResult got = rig.engine->take(id);
    CHECK(got.tokens == base.tokens);
    check_clean(d, 4);
    check_final(d, with_reply(r, got));
  }
}

TEST_CASE("feature drafters: a request for a kind without a factory is refused", "[model][engine][features]") {
  PairOptions o;
  o.target_path = test::target_model();
  ModelPair pair = ModelPair::load(o);
  Engine e(*pair.target, nullptr);
  CHECK(e.has_drafter(DrafterKind::ngram));
  CHECK_FALSE(e.has_drafter(DrafterKind::model));
  CHECK_FALSE(e.has_drafter(DrafterKind::block));
  GenerateRequest r;
  r.prompt = pair.encode_prompt("Hello");
  r.spec.drafter = DrafterKind::mtp;
  try {
    e.submit(r);
    FAIL("submit accepted an mtp request without an MTP drafter");
  } catch (const GenerationError& err) {
    CHECK(err.kind() == "drafter_unavailable");
    CHECK(std::string(err.what()).find("mtp") != std::string::npos);
  }
  CHECK(e.n_active() == 0);
  r.spec.draft_k = 0;  // no drafting: no drafter needed
  const Engine::SeqId id = e.submit(r);
  e.run_until_finished(id);
  CHECK(e.take(id).stats.n_generated > 0);
  CHECK_THROWS_AS(e.set_drafter_factory(DrafterKind::model, {}), std::invalid_argument);
  CHECK_THROWS_AS(e.set_drafter_factory(DrafterKind::block, [](int) { return std::unique_ptr<Drafter>(); }),
                  std::invalid_argument);
  CHECK_FALSE(e.has_drafter(DrafterKind::block));
}

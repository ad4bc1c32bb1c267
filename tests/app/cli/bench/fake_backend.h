// A deterministic stand-in for the Engine in runner tests: every request emits tokens
// f(prompt, i) = (sum of the prompt ids * 31 + i) mod 1000; speculative requests (draft_k > 0)
// report steps of `accept_per_step` accepted drafts + 1 target token. `mismatch_prompt_len`
// makes speculative requests whose prompt has that many ids emit a wrong token at index
// `mismatch_at` (the deliberately broken drafter of the identity check). Approximate (PIPO)
// requests emit two tokens a step, the second flagged as the head's.
#pragma once

#include <map>
#include <numeric>
#include <set>

#include "app/cli/bench/runner.h"

namespace specchat::test {
using namespace specchat::bench;

class FakeBackend : public BenchBackend {
 public:
  int cap = 4;
  int ctx = 256;
  int accept_per_step = 2;
  int mismatch_prompt_len = -1;
  int mismatch_at = 3;
  // Approximate configurations (pipo) differ from baseline at this token of every output (-1 = never).
  int approximate_diff_at = 2;
  long submitted = 0;
  // What take_monitor reports for each approximate request (the fidelity gauge).
  ApproxMonitor monitor;
  int max_active_seen = 0;

  std::vector<int32_t> encode(const BenchPrompt& p, const std::string&) override {
    std::vector<int32_t> ids = {1};
    for (char ch : p.turns.front()) ids.push_back(static_cast<unsigned char>(ch));
    return ids;
  }
  int n_ctx() const override { return ctx; }
  int capacity() const override { return cap; }
  SpecConfig plan(const BenchConfig& c, const std::vector<int32_t>&) override {
    SpecConfig s;
    s.draft_k = c.baseline() ? 0 : c.settings.draft_k;
    return s;
  }
  void clear_cache() override {}
  int64_t submit(const GenerateRequest& req, TokenCallback cb) override {
    if (static_cast<int>(active_.size()) >= cap) throw GenerationError("engine_full", "full");
    const int64_t id = ++next_;
    Seq& s = active_[id];
    s.req = req;
    s.cb = std::move(cb);
    s.base = std::accumulate(req.prompt.begin(), req.prompt.end(), 0L) * 31;
    ++submitted;
    max_active_seen = std::max(max_active_seen, static_cast<int>(active_.size()));
    return id;
  }
  int64_t submit_config(const BenchConfig& c, const BenchPrompt& p, const GenerateRequest& req,
                        TokenCallback cb) override {
    const int64_t id = submit_prompt(p, req, std::move(cb));
    active_[id].approximate = c.approximate();
    return id;
  }
  void step() override {
    for (auto& [id, s] : active_) {
      if (s.done) continue;
      const bool spec = s.req.spec.draft_k > 0 && !s.approximate;
      // A PIPO step emits [token 1, token 2]: the head's token comes after the backbone's.
      const int emit = s.approximate ? 2 : spec ? std::min(accept_per_step, s.req.spec.draft_k) + 1 : 1;
      GenerationStats& st = s.res.stats;
      ++st.n_steps;
      if (spec) st.n_drafted += s.req.spec.draft_k;
      if (s.approximate) ++st.n_drafted;
      for (int e = 0; e < emit && static_cast<int>(s.res.tokens.size()) < s.req.max_tokens; ++e) {
        const int i = static_cast<int>(s.res.tokens.size());
        int32_t tok = static_cast<int32_t>((s.base + i) % 1000);
        if (spec && static_cast<int>(s.req.prompt.size()) == mismatch_prompt_len && i == mismatch_at) tok += 1;
        if (s.approximate && i == approximate_diff_at) tok += 1;
        const bool drafted = s.approximate ? e == 1 : spec && e < emit - 1;
        s.res.tokens.push_back(tok);
        s.res.drafted.push_back(drafted ? 1 : 0);
        if (drafted) ++st.n_accepted;
        TokenEvent ev;
        ev.id = tok;
        ev.drafted = drafted;
        ev.step = st.n_steps - 1;
        if (s.cb) s.cb(ev);
      }
      st.n_generated = static_cast<int>(s.res.tokens.size());
      if (st.n_generated >= s.req.max_tokens) s.done = true;
    }
  }
  bool finished(int64_t id) const override { return active_.at(id).done; }
  GenerationResult take(int64_t id) override {
    GenerationResult r = std::move(active_.at(id).res);
    if (active_.at(id).approximate) monitored_.insert(id);
    active_.erase(id);
    return r;
  }
  ApproxMonitor take_monitor(int64_t id) override { return monitored_.erase(id) ? monitor : ApproxMonitor{}; }

 private:
  struct Seq {
    GenerateRequest req;
    TokenCallback cb;
    GenerationResult res;
    long base = 0;
    bool done = false;
    bool approximate = false;
  };
  std::map<int64_t, Seq> active_;
  std::set<int64_t> monitored_;
  int64_t next_ = 0;
};

// A suite of n prompts per category over `cats`, prompt text "<cat> prompt <i>" (distinct lengths).
inline BenchSuite fake_suite(const std::vector<std::string>& cats, int n) {
  BenchSuite s;
  s.name = "fake";
  for (const std::string& c : cats) {
    for (int i = 0; i < n; ++i) {
      BenchPrompt p;
      p.id = c + "-" + std::to_string(i);
      p.category = c;
      p.turns = {c + " prompt " + std::string(static_cast<size_t>(i), 'x')};
      p.source = "test";
      s.prompts.push_back(p);
    }
  }
  return s;
}

}  // namespace specchat::test

#include "engine/speculative/calibration.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

#include "engine/model.h"
#include "engine/speculative/budget.h"

namespace specchat {

int64_t RankCounts::positions() const {
  int64_t n = misses;
  for (int64_t h : hits) n += h;
  return n;
}

std::vector<double> RankCounts::accept_by_rank() const {
  const int64_t n = positions();
  std::vector<double> a(hits.size(), 0.0);
  if (n == 0) return a;
  for (size_t r = 0; r < hits.size(); ++r) a[r] = static_cast<double>(hits[r]) / static_cast<double>(n);
  return a;
}

int draft_rank(std::span<const float> logits, int32_t id) {
  const float x = logits[static_cast<size_t>(id)];
  int rank = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > x || (logits[i] == x && static_cast<int32_t>(i) < id)) ++rank;
  }
  return rank;
}

void count_draft_ranks(LlamaModel& draft, std::span<const int32_t> ctx, int from, RankCounts& counts,
                       std::vector<int8_t>* ranks) {
  const int n = static_cast<int>(ctx.size());
  if (from < 1 || from > n || n > draft.n_ctx()) throw std::invalid_argument("count_draft_ranks: context does not fit");
  if (counts.hits.size() > 127) throw std::invalid_argument("count_draft_ranks: more than 127 ranks");
  const size_t nv = static_cast<size_t>(draft.config().n_vocab);
  const int R = static_cast<int>(counts.hits.size());
  KvCache& kv = draft.kv();
  kv.truncate(0);
  // A target whose vocabulary has more trailing padding entries than the draft's (vocab.h,
  // check_draft_vocab) may have emitted ids the draft lacks: the draft reads its unknown token
  // there, and such a target token counts as a miss.
  std::vector<int32_t> mapped(ctx.begin(), ctx.end());
  for (int32_t& t : mapped) {
    if (t >= static_cast<int32_t>(nv)) t = draft.vocab().unk_id;
  }
  const std::span<const int32_t> in(mapped);
  // Row i of the forward over ctx[0..n − 1) predicts ctx[i + 1].
  for (int start = 0; start < n - 1;) {
    const int len = std::min(n - 1 - start, draft.max_batch());
    const auto part = in.subspan(static_cast<size_t>(start), static_cast<size_t>(len));
    const auto logits = draft.forward(Batch::chain(part, start, true));
    kv.commit(part);
    for (int r = 0; r < len; ++r) {
      const int i = start + r + 1;
      if (i < from) continue;
      const int32_t want = ctx[static_cast<size_t>(i)];
      const int rank = want < static_cast<int32_t>(nv) ? draft_rank(logits.subspan(static_cast<size_t>(r) * nv, nv), want) : R;
      if (rank < R) counts.hits[static_cast<size_t>(rank)]++;
      else counts.misses++;
      if (ranks) ranks->push_back(static_cast<int8_t>(std::min(rank, R)));
    }
    start += len;
  }
  kv.truncate(0);
}

namespace {

// A batch of `len` tokens at slot `at` continuing the context (a chain of real tokens taken
// cyclically from ctx, starting with ctx[at]; attention cost depends on the length, not the shape), all rows' logits.
Batch timing_batch(std::span<const int32_t> ctx, int at, int len) {
  std::vector<int32_t> toks;
  for (int i = 0; i < len; ++i) toks.push_back(ctx[static_cast<size_t>(at + i) % ctx.size()]);
  return Batch::chain(toks, at, true);
}

// Prefills ctx[0 .. n − 1) so the next forward starts at slot n − 1.
void prefill(LlamaModel& m, std::span<const int32_t> ctx) {
  KvCache& kv = m.kv();
  kv.truncate(0);
  const int n = static_cast<int>(ctx.size());
  for (int start = 0; start < n - 1;) {
    const int len = std::min(n - 1 - start, m.max_batch());
    const auto part = ctx.subspan(static_cast<size_t>(start), static_cast<size_t>(len));
    m.forward(Batch::chain(part, start, false));
    kv.commit(part);
    start += len;
  }
}

}  // namespace

StepTimings measure_step_timings(LlamaModel& target, LlamaModel* draft, std::span<const int32_t> ctx,
                                 const std::vector<int>& verify_nodes, const std::vector<int>& draft_widths,
                                 int reps, double* disorder) {
  if (ctx.empty()) throw std::invalid_argument("measure_step_timings: empty context");
  StepTimings t;
  const int n = static_cast<int>(ctx.size());
  for (int N : verify_nodes) {
    if (N < 0 || N + 1 > target.max_batch() || n - 1 + N + 1 > target.n_ctx()) continue;
    t.verify_nodes.push_back(N);
  }
  if (draft) {
    for (int w : draft_widths) {
      if (w < 1 || w > draft->max_batch() || n - 1 + w > draft->n_ctx()) continue;
      t.draft_widths.push_back(w);
    }
  }
  t.verify_ms.assign(t.verify_nodes.size(), std::numeric_limits<double>::infinity());
  t.draft_ms.assign(t.draft_widths.size(), std::numeric_limits<double>::infinity());
  // One warm-up round over every size first: a process's first forwards run on cold caches and
  // pages (a one-row forward timed first measured 1.4x its later time). Then `reps` rounds over
  // all sizes in turn, each size's fastest forward counting (a preempted forward is slower,
  // never faster, than its cost). Round by round rather than each size's forwards back to back:
  // when another program takes the cores for a while, it slows one forward of many sizes, not
  // every forward of a few (regression: under load, sizes 0-3 all timed slow made a flat table
  // from which auto chose chains of 4 to 7).
  auto rounds = [&](LlamaModel& m, const std::vector<int>& rows, std::vector<double>& out, bool warm) {
    std::vector<Batch> batches;
    for (int r : rows) batches.push_back(timing_batch(ctx, n - 1, r));
    if (warm) {
      for (const Batch& b : batches) m.forward(b);
    }
    for (int rep = 0; rep < std::max(1, reps); ++rep) {
      for (size_t i = 0; i < batches.size(); ++i) {
        m.forward(batches[i]);  // untimed: the previous size's forward left other data in the caches
        const auto t0 = std::chrono::steady_clock::now();
        m.forward(batches[i]);
        out[i] = std::min(out[i], std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  };
  std::vector<int> verify_rows;
  for (int N : t.verify_nodes) verify_rows.push_back(N + 1);
  // A table out of order by more than kTimingNoiseRatio (a size slower than a larger one) was
  // disturbed: up to two more sets of rounds, whose forwards can only lower the times.
  double worst = 1.0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    prefill(target, ctx);
    rounds(target, verify_rows, t.verify_ms, attempt == 0);
    target.kv().truncate(0);
    if (draft && !t.draft_widths.empty()) {
      prefill(*draft, ctx);
      rounds(*draft, t.draft_widths, t.draft_ms, attempt == 0);
      draft->kv().truncate(0);
    }
    StepTimings check = t;
    worst = make_timings_monotone(check);
    if (worst <= kTimingNoiseRatio) break;
  }
  make_timings_monotone(t);
  if (disorder) *disorder = worst;
  return t;
}

}  // namespace specchat

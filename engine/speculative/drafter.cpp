#include "engine/speculative/drafter.h"

#include <algorithm>

#include "engine/model.h"

namespace specchat {

std::span<const float> ModelDrafter::feed_context(std::span<const int32_t> ctx) {
  KvCache& kv = m_.kv();
  const int n = static_cast<int>(ctx.size());
  // Keep at most n - 1 cached tokens: the last one is fed again to get its logits.
  int keep = std::min(kv.common_prefix(ctx), n - 1);
  kv.truncate(keep);
  std::span<const float> logits;
  while (keep < n) {
    const int len = std::min(n - keep, m_.max_batch());
    const Batch b = Batch::chain(ctx.subspan(static_cast<size_t>(keep), static_cast<size_t>(len)), keep, false);
    logits = m_.forward(b);
    kv.commit(ctx.subspan(static_cast<size_t>(keep), static_cast<size_t>(len)));
    keep += len;
  }
  return logits;
}

void ModelDrafter::sync(std::span<const int32_t> ctx) {
  const int n = static_cast<int>(ctx.size());
  if (n < 2 || n > m_.n_ctx()) return;
  // Prefill all but the last token (propose feeds the last one).
  KvCache& kv = m_.kv();
  int keep = std::min(kv.common_prefix(ctx), n - 1);
  kv.truncate(keep);
  while (keep < n - 1) {
    const int len = std::min(n - 1 - keep, m_.max_batch());
    const auto part = ctx.subspan(static_cast<size_t>(keep), static_cast<size_t>(len));
    m_.forward(Batch::chain(part, keep, false));
    kv.commit(part);
    keep += len;
  }
}

DraftChain ModelDrafter::propose(std::span<const int32_t> ctx, int k, const SamplingParams& params,
                                 Rng& rng) {
  DraftChain out;
  const int n = static_cast<int>(ctx.size());
  // Drafting d_i feeds d_{i-1} at position n + i - 2, which must fit the draft's context.
  k = std::min(k, m_.n_ctx() - n + 1);
  if (k <= 0 || n == 0 || n > m_.n_ctx()) return out;
  std::span<const float> logits = feed_context(ctx);
  for (int i = 0; i < k; ++i) {
    Distribution q = process_logits(logits, params);
    const int32_t t = params.greedy() ? q.ids[0] : q.sample(rng);
    out.tokens.push_back(t);
    out.q.push_back(std::move(q));
    if (i + 1 == k) break;
    const int32_t one[1] = {t};
    logits = m_.forward(Batch::chain(one, n + i, false));
    m_.kv().commit(one);
  }
  return out;
}

}  // namespace specchat

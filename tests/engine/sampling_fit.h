// Statistical losslessness on the bundled target: the first two sampled tokens against the
// target's own processed distributions (chi-square; used by the chain and tree tests).
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "engine/model.h"
#include "model_fixture.h"
#include "stats_util.h"

namespace specchat::test {

struct TwoTokenFit {
  ChiSquare first;   // first token vs p(. | prompt)
  ChiSquare second;  // second token, given the most frequent first token t, vs p(. | prompt, t)
  int n_second = 0;  // samples behind `second`
  int32_t top = -1;  // that most frequent first token
};

// Runs sample(seed) for seeds 1..n (each returns the emitted tokens, at least one) and fits the
// first two tokens against the target's distributions processed with `s`.
inline TwoTokenFit fit_first_two_tokens(ModelPair& mp, const std::vector<int32_t>& prompt, const SamplingParams& s,
                                        int n, const std::function<std::vector<int32_t>(uint64_t)>& sample) {
  auto expected = [&](const std::vector<int32_t>& ctx) {
    mp.target->kv().truncate(0);
    const Distribution p = process_logits(mp.target->forward(Batch::chain(ctx, 0, false)), s);
    std::map<int, double> e;
    for (size_t i = 0; i < p.ids.size(); ++i) e[p.ids[i]] = p.probs[i];
    return e;
  };
  std::map<int, int> first;
  std::map<int32_t, std::map<int, int>> second;
  for (int seed = 1; seed <= n; ++seed) {
    const std::vector<int32_t> toks = sample(static_cast<uint64_t>(seed));
    first[toks.at(0)]++;
    if (toks.size() >= 2) second[toks[0]][toks[1]]++;
  }
  TwoTokenFit fit;
  fit.first = chi_square(first, expected(prompt), n);
  int top_n = 0;
  for (const auto& [id, cnt] : first) {
    if (cnt > top_n) fit.top = id, top_n = cnt;
  }
  std::vector<int32_t> ctx = prompt;
  ctx.push_back(fit.top);
  for (const auto& [id, cnt] : second[fit.top]) fit.n_second += cnt;
  fit.second = chi_square(second[fit.top], expected(ctx), fit.n_second);
  return fit;
}

}  // namespace specchat::test

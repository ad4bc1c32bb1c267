#include "engine/speculative/ngram_drafter.h"

#include <algorithm>
#include <cmath>

#include "engine/speculative/tree_builder.h"

namespace specchat {

namespace {

// The context followed by drafted paths, as a NodeSource (see NgramDrafter::propose).
class NgramNodes final : public NodeSource {
 public:
  NgramNodes(std::span<const int32_t> ctx, int max_n, int min_n) : ctx_(ctx), max_n_(max_n), min_n_(min_n) {}

  void score(const DraftTree& t, std::span<const int32_t> slots) override {
    rows_.assign(slots.size(), {});
    for (size_t r = 0; r < slots.size(); ++r) {
      path_.clear();
      for (int32_t v = slots[r] - 1; v >= 0; v = t.nodes[static_cast<size_t>(v)].parent) {
        path_.push_back(t.nodes[static_cast<size_t>(v)].token);
      }
      std::reverse(path_.begin(), path_.end());
      continuations(rows_[r]);
    }
  }

  bool free_scoring() const override { return true; }  // a scan of the context, no forward

  void top(int r, int k, std::vector<Candidate>& out) override {
    const std::vector<Candidate>& row = rows_.at(static_cast<size_t>(r));
    out.assign(row.begin(), row.begin() + std::min<std::ptrdiff_t>(std::max(k, 0), static_cast<std::ptrdiff_t>(row.size())));
  }

 private:
  // Token i of the context followed by path_.
  int32_t at(int i) const {
    const int n = static_cast<int>(ctx_.size());
    return i < n ? ctx_[static_cast<size_t>(i)] : path_[static_cast<size_t>(i - n)];
  }

  // The ranked continuations of the longest suffix of ctx ⧺ path with an earlier occurrence.
  void continuations(std::vector<Candidate>& out) {
    const int len = static_cast<int>(ctx_.size() + path_.size());
    struct Count {
      int32_t token;
      int count;
    };
    std::vector<Count> counts;  // in order of first sight: most recent first
    for (int n = std::min(max_n_, len - 1); n >= min_n_ && counts.empty(); --n) {
      // Most recent occurrence first; the suffix itself (at len − n) is not a match.
      for (int j = len - n - 1; j >= 0; --j) {
        bool match = true;
        for (int i = 0; i < n && match; ++i) match = at(j + i) == at(len - n + i);
        if (!match) continue;
        const int32_t next = at(j + n);
        auto it = std::find_if(counts.begin(), counts.end(), [&](const Count& c) { return c.token == next; });
        if (it == counts.end()) {
          counts.push_back({next, 1});
        } else {
          ++it->count;
        }
      }
    }
    int total = 0;
    for (const Count& c : counts) total += c.count;
    std::stable_sort(counts.begin(), counts.end(), [](const Count& a, const Count& b) { return a.count > b.count; });
    out.clear();
    for (const Count& c : counts) out.push_back({std::log(static_cast<double>(c.count) / total), c.token});
  }

  std::span<const int32_t> ctx_;
  int max_n_, min_n_;
  std::vector<int32_t> path_;
  std::vector<std::vector<Candidate>> rows_;
};

}  // namespace

DraftTree NgramDrafter::propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                                const SamplingParams& params, Rng& rng) {
  if (ctx.size() < 2) return {};
  NgramNodes src(ctx, max_n_, min_n_);
  RngChoices choices(rng);
  return build_tree(src, budget, max_nodes, params, choices);
}

}  // namespace specchat

#include "engine/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/cpu/sampling.h"

namespace specchat {

double Distribution::prob(int32_t id) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == id) return probs[i];
  }
  return 0.0;
}

int32_t Distribution::sample(Rng& rng) const {
  const double u = rng.uniform();
  double acc = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    acc += probs[i];
    if (u < acc) return ids[i];
  }
  // u landed in the rounding slack above the total: the last id with non-zero mass.
  for (size_t i = ids.size(); i-- > 0;) {
    if (probs[i] > 0) return ids[i];
  }
  return ids.empty() ? 0 : ids.back();
}

int32_t Distribution::argmax() const {
  size_t best = 0;
  for (size_t i = 1; i < ids.size(); ++i) {
    if (probs[i] > probs[best] || (probs[i] == probs[best] && ids[i] < ids[best])) best = i;
  }
  return ids.empty() ? 0 : ids[best];
}

int32_t argmax(std::span<const float> logits) {
  return cpu::argmax_row(logits.data(), static_cast<int64_t>(logits.size()));
}

bool all_finite(std::span<const float> x) { return cpu::all_finite(x.data(), static_cast<int64_t>(x.size())); }

namespace {

// Strict total order on token ids: larger logit first, equal logits by the lower id. Every
// selection below uses it, so the order (and the result) is the same whatever algorithm picks
// the elements, and the same as a full std::sort with it (the original implementation).
struct ByLogit {
  const float* l;
  bool operator()(int32_t a, int32_t b) const { return l[a] > l[b] || (l[a] == l[b] && a < b); }
};

constexpr size_t kBlock = 16;

// Whether any of l[0, kBlock) is > w (written so that GCC vectorises it at -O3).
inline bool any_above(const float* l, float w) {
  int any = 0;
  for (size_t j = 0; j < kBlock; ++j) any |= (l[j] > w);
  return any != 0;
}

// Appends to `dst` the c best ids (in ByLogit order, best first) among those ranked strictly
// after the id `after` (after < 0: among all ids). Needs 1 <= c <= the number of such ids.
// Few of many (c <= n/16): one pass over the logits with a heap of c ids kept in dst itself;
// most ids cost one float comparison. Else the candidates are gathered in `spare` and
// nth_element + sort pick them.
void append_best(std::span<const float> logits, int32_t after, size_t c, std::vector<int32_t>& dst,
                 std::vector<int32_t>& spare) {
  const size_t n = logits.size();
  const ByLogit by{logits.data()};
  auto eligible = [&](int32_t id) { return after < 0 || by(after, id); };
  const size_t base = dst.size();
  if (c * 16 <= n) {
    size_t i = 0;
    for (; i < n && dst.size() - base < c; ++i) {
      if (eligible(static_cast<int32_t>(i))) dst.push_back(static_cast<int32_t>(i));
    }
    const auto first = dst.begin() + static_cast<std::ptrdiff_t>(base);
    std::make_heap(first, dst.end(), by);  // front: the worst of the c kept so far
    float worst = logits[static_cast<size_t>(*first)];
    // Ids are scanned in increasing order, so a later id equal to the worst kept logit ranks
    // after it: only a strictly larger logit can enter.
    auto offer = [&](size_t id) {
      if (!(logits[id] > worst) || !eligible(static_cast<int32_t>(id))) return;
      std::pop_heap(first, dst.end(), by);
      dst.back() = static_cast<int32_t>(id);
      std::push_heap(first, dst.end(), by);
      worst = logits[static_cast<size_t>(*first)];
    };
    for (; i < n && i % kBlock != 0; ++i) offer(i);
    for (; i + kBlock <= n; i += kBlock) {
      // Whole blocks below the worst kept logit are skipped (a vectorisable test).
      if (!any_above(logits.data() + i, worst)) continue;
      for (size_t j = 0; j < kBlock; ++j) offer(i + j);
    }
    for (; i < n; ++i) offer(i);
    std::sort_heap(first, dst.end(), by);
  } else {
    spare.clear();
    spare.reserve(n);  // once to the full vocabulary: later calls then never reallocate
    for (size_t i = 0; i < n; ++i) {
      if (eligible(static_cast<int32_t>(i))) spare.push_back(static_cast<int32_t>(i));
    }
    const auto mid = spare.begin() + static_cast<std::ptrdiff_t>(c);
    if (mid != spare.end()) std::nth_element(spare.begin(), mid, spare.end(), by);
    std::sort(spare.begin(), mid, by);
    dst.insert(dst.end(), spare.begin(), mid);
  }
}

// Order-preserving key of a finite logit for a descending sort: larger logits get smaller keys;
// -0.0 and +0.0 (equal) get one key.
inline uint32_t descending_key(float logit) {
  uint32_t u;
  const float f = logit + 0.0f;  // -0.0 + 0.0 = +0.0
  std::memcpy(&u, &f, sizeof u);
  const uint32_t ascending = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return ~ascending;
}

// ids = 0 … n − 1 in ByLogit order (larger logit first, equal logits by the lower id): an LSD
// radix sort on descending_key in passes of 11 bits (stable, and the ids start ascending, so
// equal keys keep ascending ids), O(n) where std::sort with ByLogit was O(n log n) with an
// indirect comparison (4096 ids: about a tenth of its time). The same order as that sort for
// finite logits. A pass whose digit is the same for every id is skipped.
void sort_all_by_logit(std::span<const float> logits, std::vector<int32_t>& ids, SamplerScratch& s) {
  const size_t n = logits.size();
  s.keys.resize(n);
  s.keys_out.resize(n);
  s.order.resize(n);
  ids.resize(n);
  // Ping-pong between the caller's buffer and the scratch by pointer (the vectors keep their
  // storage: a warmed-up loop neither allocates nor moves them).
  uint32_t *keys = s.keys.data(), *keys_out = s.keys_out.data();
  int32_t *cur = ids.data(), *next = s.order.data();
  for (size_t i = 0; i < n; ++i) {
    cur[i] = static_cast<int32_t>(i);
    keys[i] = descending_key(logits[i]);
  }
  constexpr int kBits = 11;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  for (int shift = 0; shift < 32; shift += kBits) {
    std::array<uint32_t, size_t{1} << kBits> start{};
    for (size_t i = 0; i < n; ++i) ++start[(keys[i] >> shift) & kMask];
    if (start[(keys[0] >> shift) & kMask] == n) continue;  // one digit for all: order unchanged
    uint32_t sum = 0;
    for (uint32_t& c : start) {
      const uint32_t here = c;
      c = sum;
      sum += here;
    }
    for (size_t i = 0; i < n; ++i) {
      const uint32_t at = start[(keys[i] >> shift) & kMask]++;
      keys_out[at] = keys[i];
      next[at] = cur[i];
    }
    std::swap(keys, keys_out);
    std::swap(cur, next);
  }
  if (cur != ids.data()) std::copy(cur, cur + n, ids.data());
}

// exp((logit - mx) / T), in double: the softmax weight of one id. Written exactly as the
// original implementation did, so the weights are bit-identical to it.
inline double weight(float logit, double mx, float temperature) {
  return std::exp((logit - mx) / temperature);
}

// The tail shared by the top-k and the unrestricted paths: out.ids holds the kept ids in
// ByLogit order; softmax over them, then the top-p cut, renormalised. Operation for operation
// the original implementation, so the result is bit-identical to it.
void finish_sorted(std::span<const float> logits, const SamplingParams& p, Distribution& out) {
  const size_t keep = out.ids.size();
  const double mx = logits[static_cast<size_t>(out.ids[0])];
  out.probs.resize(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    out.probs[i] = weight(logits[static_cast<size_t>(out.ids[i])], mx, p.temperature);
    sum += out.probs[i];
  }
  for (size_t i = 0; i < keep; ++i) out.probs[i] /= sum;
  size_t cut = keep;
  if (p.top_p < 1.0f) {
    double acc = 0;
    for (size_t i = 0; i < keep; ++i) {
      acc += out.probs[i];
      if (acc >= p.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < cut; ++i) kept += out.probs[i];
  out.ids.resize(cut);
  out.probs.resize(cut);
  for (size_t i = 0; i < cut; ++i) out.probs[i] /= kept;
}

// Below this scaled logit (logit - max) / T the weight exp(x) < 4.3e-18 is under half an ulp of
// any sum that already holds the maximum's weight 1.0, so adding it leaves such a sum unchanged:
// it is skipped (no exp call) without changing a bit.
constexpr double kNegligible = -40.0;

// top_p < 1 without a top-k restriction: the nucleus without sorting the vocabulary.
// 1. The prefix in descending order is selected in growing chunks (64, 256, 1024, ... ids, each
//    the best ones ranked after the previous chunk) until the running probability reaches
//    top_p: the same ids in the same order as a full sort would give, since ByLogit is a total
//    order.
// 2. The softmax normaliser over ALL ids: sum = 1 (the maximum's own weight) + the other weights
//    in id order. NUMERICS: the original summed the weights in descending-logit order, so this
//    sum may differ from it in the last bits (a different rounding sequence of the same terms;
//    both start from the maximum's 1.0, so both drop every term under half an ulp). The
//    probabilities then differ by a few ulps (they are renormalised over the prefix, which
//    cancels the sum up to rounding), and the top-p cut could only differ if the running sum
//    landed within those few ulps of top_p.
// 3. Renormalised over the prefix exactly as the original (each kept id's weight is recomputed
//    with the same expression: exp is deterministic, so it equals the term of the sum).
void nucleus(std::span<const float> logits, const SamplingParams& p, SamplerScratch& scratch,
             Distribution& out) {
  const size_t n = logits.size();
  size_t chunk = 64;
  size_t c = std::min(chunk, n);
  append_best(logits, -1, c, out.ids, scratch.order);
  const int32_t top = out.ids[0];  // == argmax(logits)
  const double mx = logits[static_cast<size_t>(top)];
  double sum = 1.0;  // weight(mx) == exp(0) == 1
  for (size_t i = 0; i < n; ++i) {
    if (i == static_cast<size_t>(top)) continue;
    const double x = (logits[i] - mx) / p.temperature;  // as in weight()
    if (x < kNegligible) continue;
    sum += std::exp(x);
  }
  double acc = 0;
  size_t cut = 0;  // 0: top_p not reached yet
  size_t done = 0;
  while (true) {
    for (size_t i = done; i < done + c; ++i) {
      const double pr = weight(logits[static_cast<size_t>(out.ids[i])], mx, p.temperature) / sum;
      out.probs.push_back(pr);
      acc += pr;
      if (acc >= p.top_p) {
        cut = i + 1;
        break;
      }
    }
    done += c;
    if (cut != 0 || done == n) break;
    chunk *= 4;
    c = std::min(chunk, n - done);
    append_best(logits, out.ids.back(), c, out.ids, scratch.order);
  }
  if (cut == 0) cut = n;  // rounding kept the total under top_p: everything, as the original
  double kept = 0;
  for (size_t i = 0; i < cut; ++i) kept += out.probs[i];
  out.ids.resize(cut);
  out.probs.resize(cut);
  for (size_t i = 0; i < cut; ++i) out.probs[i] /= kept;
}

}  // namespace

void process_logits(std::span<const float> logits, const SamplingParams& p, Distribution& out,
                    SamplerScratch& scratch) {
  out.ids.clear();
  out.probs.clear();
  if (p.greedy()) {
    out.ids.push_back(argmax(logits));
    out.probs.push_back(1.0);
    return;
  }
  const size_t n = logits.size();
  if (n == 0) return;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    append_best(logits, -1, static_cast<size_t>(p.top_k), out.ids, scratch.order);
    finish_sorted(logits, p, out);
  } else if (p.top_p < 1.0f) {
    nucleus(logits, p, scratch, out);
  } else {
    // Pure temperature sampling: every id is in the distribution, in descending order (sample()
    // walks them in that order), so this one case sorts the whole vocabulary (a radix sort).
    sort_all_by_logit(logits, out.ids, scratch);
    finish_sorted(logits, p, out);
  }
}

Distribution process_logits(std::span<const float> logits, const SamplingParams& p) {
  thread_local SamplerScratch scratch;
  Distribution d;
  process_logits(logits, p, d, scratch);
  return d;
}

}  // namespace specchat

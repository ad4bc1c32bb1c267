// Sampling: the processed distribution (temperature, top-k, top-p) and draws from it.
//
// Speculative sampling needs the *processed* distributions of both models (FAULT-KINDS B02):
// the same SamplingParams applied to target logits give p, to draft logits give q.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace specchat {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax, ties to the lowest id)
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off; keeps the smallest prefix with mass >= top_p
  uint64_t seed = 0;         // all randomness of a generation derives from this seed (B04)
  bool greedy() const { return temperature <= 0.0f; }
};

// Counter-based RNG for one generation: same seed -> same stream, independent of any other
// generation (no global state).
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(gen_); }  // [0, 1)
 private:
  std::mt19937_64 gen_;
};

// A sparse probability distribution over the vocabulary: the ids with non-zero mass and their
// probabilities (sum 1). Greedy gives a one-hot distribution.
struct Distribution {
  std::vector<int32_t> ids;
  std::vector<double> probs;
  double prob(int32_t id) const;   // probability of token `id`, in [0, 1]; 0 if not present
  int32_t sample(Rng& rng) const;  // inverse-CDF draw: one uniform from rng, ids in order
  int32_t argmax() const;          // id of the largest prob (lowest id on ties); 0 when empty
};

// Reusable working memory for process_logits (one per thread / decode loop; not shared between
// concurrent calls). Its buffers grow to the largest vocabulary seen and keep their capacity,
// so a warmed-up loop calls process_logits without allocating. Contents between calls are
// meaningless.
struct SamplerScratch {
  std::vector<int32_t> order;  // [n_vocab] token ids, partially sorted by descending logit
  std::vector<uint32_t> keys, keys_out;  // [n_vocab] radix-sort keys (pure temperature sampling)
};

// logits: [n_vocab] raw f32 logits (finite; the engine refuses non-finite ones). Writes the
// processed distribution for `params` into `out`:
//   greedy (T <= 0) -> one-hot {argmax, 1.0};
//   else softmax(logits / T) (exp and sums in double) restricted to the top-k ids (k = 0 or
//   k >= n_vocab: all), then to the smallest prefix whose running probability reaches top_p
//   (top_p >= 1: all), renormalised to sum 1.
// out.ids are sorted by descending logit, ties by ascending id (so Distribution::sample, which
// walks ids in order, is reproducible for a seed); out.probs[i] is the probability of out.ids[i].
// The capacities of out.ids / out.probs and of `scratch` are reused (each holds at most n_vocab
// entries): once they have grown to the largest size the calls need (after a pure-temperature
// call: all of it), nothing is allocated. An empty `logits` gives an empty `out` (except
// greedy, which gives {0, 1.0} as argmax does).
// Cost: top_k > 0: one pass over the logits plus O(k log k) (top_k < n_vocab / 16; else
// nth_element); top_p < 1 alone: n_vocab exp() for the normaliser plus sorting only the
// selected prefix (in chunks of 64, 256, ...); pure temperature sampling (neither restricts): a
// full sort, since every id is in the distribution in that order (an O(n_vocab) radix sort on
// the logits' bits, three passes of 11 bits).
void process_logits(std::span<const float> logits, const SamplingParams& params, Distribution& out,
                    SamplerScratch& scratch);

// As above, returning a new Distribution (allocates it; working memory is a thread_local
// SamplerScratch, so repeated calls on one thread do not reallocate that).
Distribution process_logits(std::span<const float> logits, const SamplingParams& params);

// Index of the largest logit (lowest id on ties). logits: [n_vocab].
int32_t argmax(std::span<const float> logits);

// True when no value is infinite or NaN (empty: true). One pass without early exit, vectorised:
// the engine checks every verification row and drafted row with it.
bool all_finite(std::span<const float> x);

}  // namespace specchat

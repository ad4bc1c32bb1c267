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
  double prob(int32_t id) const;           // 0 for ids not present
  int32_t sample(Rng& rng) const;          // inverse-CDF draw
  int32_t argmax() const;
};

// logits: [n_vocab]. Returns the processed distribution for `params`:
// greedy -> one-hot at argmax; else softmax(logits / T) restricted to top-k then top-p,
// renormalised. Ties in sorting are broken by the lower id, so the result is deterministic.
Distribution process_logits(std::span<const float> logits, const SamplingParams& params);

// Index of the largest logit (lowest id on ties). logits: [n_vocab].
int32_t argmax(std::span<const float> logits);

}  // namespace specchat

// The throughput split's generator (`specchat-cli bench-suite`, scripts/make-throughput-suite):
// prompts of given input lengths in tokens × three entropy tiers, built from word pools written
// for SpecChat (no outside text), grown word by word until the tokenizer says the bucket is
// reached. Low: code and sorted lists (predictable continuations); mixed: a needle in a
// haystack and exam questions; high: creative writing and dialogue.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "app/cli/bench/suite.h"

namespace specchat::bench {

// Text -> prompt ids exactly as the runner feeds a "raw" suite (BOS + encode).
using Encoder = std::function<std::vector<int32_t>(const std::string&)>;

// The buckets for a context of n_ctx tokens: n_ctx/8, n_ctx/4, n_ctx/2 and 3·n_ctx/4 up to
// 4096 tokens of context (128, 256, 512, 768 for the bundled 1,024); beyond, 1024, 2048, 4096, …
// while ≤ 3·n_ctx/4 (room is left for the reply).
std::vector<int> default_buckets(int n_ctx);

struct ThroughputOptions {
  std::vector<int> buckets;   // tokens
  int per_cell = 4;           // prompts per (tier, bucket)
  uint64_t seed = 7;          // word-pool shuffling
  std::string tokenizer;      // recorded in the suite: the model whose tokenizer counted
};

// The suite ("prompt_format": "raw"; ids "<tier>-<bucket>-<i>", category "throughput", tier,
// bucket, input_ids = encode(text)). Every prompt's token count is the closest the word
// granularity allows to its bucket (within ±10% for buckets ≥ 16 with a subword tokenizer).
// Throws std::invalid_argument for no buckets, a bucket < 8, or per_cell < 1.
BenchSuite make_throughput_suite(const Encoder& encode, const ThroughputOptions& opt);

}  // namespace specchat::bench

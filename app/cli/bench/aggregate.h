// Aggregates of a benchmark run, recomputable from its raw records alone: per configuration ×
// concurrency × group (every request, each category, each entropy tier, each tier × bucket)
// the latency distributions, τ and α, acceptance by draft position, and the speedup over
// baseline with bootstrap 95% confidence intervals (SPEED-Bench's per-category metrics).
// Failed records (RequestRecord::failed) are counted and kept out of everything else.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli/bench/records.h"
#include "app/cli/bench/stats.h"

namespace specchat::bench {

struct AggregateOptions {
  int resamples = 1000;  // bootstrap resamples
  uint64_t seed = 1;     // bootstrap seed (each group mixes in a hash of its key)
};

struct GroupAggregate {
  std::string config;
  int concurrency = 1;
  std::string kind;   // all | category | tier | tier_bucket
  std::string group;  // "all", "coding", "low", "low/64"
  int requests = 0;   // non-failed records
  int failures = 0;
  // An approximate configuration (PIPO): its outputs are not verified by the target; `divergent`
  // of its requests differ from baseline's (counted in the aggregates, not failures).
  bool approximate = false;
  int divergent = 0;
  // The PIPO fidelity gauge over the group (records.h): KL(plain target || PIPO) of token 1 in
  // nats, the mean over all sampled steps and the largest; 0 samples = the gauge was off.
  int fidelity_samples = 0;
  double fidelity_kl_mean = 0, fidelity_kl_max = 0;
  double mean_input_tokens = 0;
  Summary ttft_ms, tpot_ms, latency_ms, user_tokens_per_s;
  // τ = tokens the steps produced (output tokens plus a final EOS) / verification steps over the group's requests (a ratio of sums, so long
  // requests weigh more), with a bootstrap CI over requests; α = accepted / drafted.
  double tau = 0;
  Interval tau_ci;
  double alpha = 0;
  // [depth] acceptance of draft position p given positions < p accepted (records.h accepted_at).
  std::vector<double> position_acceptance;
  // Speedup of each request over baseline on the same prompt, concurrency and repeat (baseline
  // latency / this latency: end-to-end, prefill of both models included); the CI is on the mean.
  Summary speedup;
  Interval speedup_ci;
};

// Output tokens per second of the whole system: all tokens of the waves over their wall time.
struct SystemAggregate {
  std::string config;
  int concurrency = 1;
  int waves = 0;
  long output_tokens = 0;
  double wall_ms = 0;
  double tokens_per_s = 0;
};

struct Aggregates {
  std::vector<GroupAggregate> groups;
  std::vector<SystemAggregate> system;
  int failures = 0;
};

// Deterministic for the same records and options (groups in order of first appearance).
Aggregates aggregate(const BenchRun& run, const AggregateOptions& opt = {});

nlohmann::json aggregates_json(const Aggregates& a);

}  // namespace specchat::bench

// ServeMetrics: the server's counters, gauges and histograms, rendered in the Prometheus text
// exposition format (version 0.0.4) under the `specchat:` namespace (issue 14 §2):
//   counters   specchat:prompt_tokens_total, generation_tokens_total, draft_tokens_total,
//              accepted_tokens_total, accepted_tokens_by_position_total{position="1".."D"},
//              requests_total{outcome="ok|cancelled|timeout|rejected|invalid|error"}
//   gauges     specchat:requests_processing, requests_deferred, kv_cache_used_tokens,
//              kv_cache_capacity_tokens, resident_memory_bytes, device_memory_used_bytes
//   histograms specchat:time_to_first_token_seconds, time_per_output_token_seconds,
//              e2e_request_latency_seconds, accepted_length_per_step
//   PIPO (APPROXIMATE mode, docs/design/pipo.md "Monitoring"), always rendered (zeros without a
//   release): counters specchat:pipo_requests_total, pipo_steps_total, pipo_head_runs_total,
//   pipo_token2_accepted_total, pipo_raw_tokens_total (tokens PIPO decoding emitted),
//   pipo_latent_pairs_total and pipo_raw_length_tokens_total (the pairs each reply's sequence
//   held at its end and the raw tokens they stand for: their ratio is the compression applied),
//   pipo_fidelity_samples_total and pipo_fidelity_kl_nats_total (the fidelity gauge, serve
//   --pipo-fidelity N: KL of token 1 against the plain target on 1 step in N, summed);
//   gauges pipo_fidelity_kl_max_nats, pipo_requests_processing, pipo_requests_deferred; and,
//   with a release loaded,
//   specchat:pipo_release_info{release="<id>"} 1.
// The token counters are the sums of the finished requests' `timings` (prompt_n, predicted_n,
// draft_n, draft_n_accepted; PIPO replies add their prompt_n and predicted_n, and draft nothing
// since nothing is proposed to the target). Thread-safe: HTTP threads, the scheduler and the
// PIPO worker update it at once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/generator.h"

namespace specchat::serve {

// A cumulative Prometheus histogram over fixed upper bounds (+Inf implied).
struct Histogram {
  std::vector<double> bounds;    // [B] ascending upper bounds
  std::vector<uint64_t> counts;  // [B] observations ≤ bounds[i] (not cumulative; rendered cumulative)
  uint64_t count = 0;            // every observation, +Inf included
  double sum = 0;
  explicit Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size(), 0) {}
  void observe(double v, uint64_t n = 1);
};

// One finished PIPO reply's monitoring figures (PipoCounters plus the sequence's lengths).
struct PipoTotals {
  long steps = 0, head_runs = 0, token2_accepted = 0;
  long raw_tokens = 0;    // tokens emitted by decoding (PADs not counted)
  long latent_pairs = 0;  // pairs the sequence held at the end (prompt + reply)
  long raw_length = 0;    // raw tokens those pairs stand for (prompt + reply)
  // false: the reply was cut off by a timeout or a cancel (its work is summed, but it is not
  // counted in pipo_requests_total; requests_total{outcome} has it).
  bool completed = true;
  // The fidelity gauge's samples in this reply (serve --pipo-fidelity): KL(plain ‖ PIPO) of
  // token 1, in nats.
  long fidelity_samples = 0;
  double fidelity_kl_sum = 0, fidelity_kl_max = 0;
};

class ServeMetrics {
 public:
  ServeMetrics();

  // One finished generation: its token counts, accepted tokens by draft position (from
  // stats.accepted_hist: position p counts the steps that accepted ≥ p drafts), accepted length
  // per step, and TPOT (decode_ms / n_generated, when anything was generated).
  void on_generation(const GenerationStats& stats);
  // Time to first token and end-to-end latency of a request, in ms from its arrival.
  void observe_ttft_ms(double ms);
  void observe_e2e_ms(double ms);
  // A request's outcome: "ok", "cancelled" (client went away), "timeout", "rejected" (queue
  // full), "invalid" (4xx), "error" (5xx).
  void count_request(const std::string& outcome);
  // Gauges sampled by the scheduler.
  void set_load(int processing, int deferred, long kv_used_tokens);
  void set_capacity(long kv_capacity_tokens);
  void set_device_memory(uint64_t bytes);
  // A finished PIPO reply (its generation statistics go to on_generation as well).
  void on_pipo(const PipoTotals& t);
  // PIPO requests running (0 or 1) and waiting, sampled by the PIPO worker.
  void set_pipo_load(int processing, int deferred);
  // The loaded PIPO release's id; "" = none (no info sample).
  void set_pipo_release(const std::string& release);

  // The exposition text (resident memory read from /proc/self/statm at render time).
  std::string render() const;

 private:
  mutable std::mutex m_;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0, draft_tokens_ = 0, accepted_tokens_ = 0;
  std::map<int, uint64_t> accepted_by_position_;  // position (1-based) -> tokens
  std::map<std::string, uint64_t> requests_;      // outcome -> count
  int processing_ = 0, deferred_ = 0;
  long kv_used_ = 0, kv_capacity_ = 0;
  uint64_t device_memory_ = 0;
  uint64_t pipo_requests_ = 0;
  PipoTotals pipo_;
  int pipo_processing_ = 0, pipo_deferred_ = 0;
  std::string pipo_release_;
  Histogram ttft_, tpot_, e2e_, accepted_len_;
};

// Resident set size of this process in bytes (/proc/self/statm); 0 when unknown.
uint64_t resident_memory_bytes();

}  // namespace specchat::serve

#include "app/serve/metrics.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace specchat::serve {

void Histogram::observe(double v, uint64_t n) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (v <= bounds[i]) {
      counts[i] += n;
      break;
    }
  }
  count += n;
  sum += v * static_cast<double>(n);
}

ServeMetrics::ServeMetrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      e2e_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}),
      accepted_len_({0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32}) {
  for (const char* o : {"ok", "cancelled", "timeout", "rejected", "invalid", "error"}) requests_[o] = 0;
}

void ServeMetrics::on_generation(const GenerationStats& s) {
  std::lock_guard<std::mutex> l(m_);
  prompt_tokens_ += static_cast<uint64_t>(s.n_prompt);
  generation_tokens_ += static_cast<uint64_t>(s.n_generated);
  draft_tokens_ += static_cast<uint64_t>(s.n_drafted);
  accepted_tokens_ += static_cast<uint64_t>(s.n_accepted);
  // accepted_hist[j] = steps that accepted exactly j drafts: position p was accepted in every
  // step with j ≥ p.
  for (size_t p = 1; p < s.accepted_hist.size(); ++p) {
    uint64_t n = 0;
    for (size_t j = p; j < s.accepted_hist.size(); ++j) n += static_cast<uint64_t>(s.accepted_hist[j]);
    accepted_by_position_[static_cast<int>(p)] += n;
  }
  for (size_t j = 0; j < s.accepted_hist.size(); ++j) {
    if (s.accepted_hist[j] > 0) accepted_len_.observe(static_cast<double>(j), static_cast<uint64_t>(s.accepted_hist[j]));
  }
  if (s.n_generated > 0) tpot_.observe(s.tpot_ms() / 1000.0);
}

void ServeMetrics::observe_ttft_ms(double ms) {
  std::lock_guard<std::mutex> l(m_);
  ttft_.observe(ms / 1000.0);
}

void ServeMetrics::observe_e2e_ms(double ms) {
  std::lock_guard<std::mutex> l(m_);
  e2e_.observe(ms / 1000.0);
}

void ServeMetrics::count_request(const std::string& outcome) {
  std::lock_guard<std::mutex> l(m_);
  ++requests_[outcome];
}

void ServeMetrics::set_load(int processing, int deferred, long kv_used_tokens) {
  std::lock_guard<std::mutex> l(m_);
  processing_ = processing;
  deferred_ = deferred;
  kv_used_ = kv_used_tokens;
}

void ServeMetrics::set_capacity(long kv_capacity_tokens) {
  std::lock_guard<std::mutex> l(m_);
  kv_capacity_ = kv_capacity_tokens;
}

void ServeMetrics::set_device_memory(uint64_t bytes) {
  std::lock_guard<std::mutex> l(m_);
  device_memory_ = bytes;
}

void ServeMetrics::on_pipo(const PipoTotals& t) {
  std::lock_guard<std::mutex> l(m_);
  if (t.completed) ++pipo_requests_;
  pipo_.steps += t.steps;
  pipo_.head_runs += t.head_runs;
  pipo_.token2_accepted += t.token2_accepted;
  pipo_.raw_tokens += t.raw_tokens;
  pipo_.latent_pairs += t.latent_pairs;
  pipo_.raw_length += t.raw_length;
  pipo_.fidelity_samples += t.fidelity_samples;
  pipo_.fidelity_kl_sum += t.fidelity_kl_sum;
  pipo_.fidelity_kl_max = std::max(pipo_.fidelity_kl_max, t.fidelity_kl_max);
}

void ServeMetrics::set_pipo_load(int processing, int deferred) {
  std::lock_guard<std::mutex> l(m_);
  pipo_processing_ = processing;
  pipo_deferred_ = deferred;
}

void ServeMetrics::set_pipo_release(const std::string& release) {
  std::lock_guard<std::mutex> l(m_);
  pipo_release_ = release;
}

uint64_t resident_memory_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

namespace {

// The shortest decimal that reads back as `v` (bucket bounds print as 0.025, not
// 0.025000000000000001); whole numbers below 2^53 print as integers (10, not 1e+01).
std::string num(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

void header(std::ostringstream& o, const std::string& name, const char* type, const char* help) {
  o << "# HELP specchat:" << name << " " << help << "\n# TYPE specchat:" << name << " " << type << "\n";
}

void scalar(std::ostringstream& o, const std::string& name, const char* type, const char* help, double v) {
  header(o, name, type, help);
  o << "specchat:" << name << " " << num(v) << "\n";
}

void histogram(std::ostringstream& o, const std::string& name, const char* help, const Histogram& h) {
  header(o, name, "histogram", help);
  uint64_t cum = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cum += h.counts[i];
    o << "specchat:" << name << "_bucket{le=\"" << num(h.bounds[i]) << "\"} " << cum << "\n";
  }
  o << "specchat:" << name << "_bucket{le=\"+Inf\"} " << h.count << "\n";
  o << "specchat:" << name << "_sum " << num(h.sum) << "\n";
  o << "specchat:" << name << "_count " << h.count << "\n";
}

// A label value in the exposition format: backslash, double quote and newline escaped.
std::string label_value(const std::string& v) {
  std::string out;
  for (char ch : v) {
    if (ch == '\\') out += "\\\\";
    else if (ch == '"') out += "\\\"";
    else if (ch == '\n') out += "\\n";
    else out += ch;
  }
  return out;
}

}  // namespace

std::string ServeMetrics::render() const {
  const uint64_t rss = resident_memory_bytes();
  std::lock_guard<std::mutex> l(m_);
  std::ostringstream o;
  scalar(o, "prompt_tokens_total", "counter", "Prompt tokens processed (sum of timings.prompt_n).",
         static_cast<double>(prompt_tokens_));
  scalar(o, "generation_tokens_total", "counter", "Tokens generated (sum of timings.predicted_n).",
         static_cast<double>(generation_tokens_));
  scalar(o, "draft_tokens_total", "counter", "Draft tokens proposed to the target (sum of timings.draft_n).",
         static_cast<double>(draft_tokens_));
  scalar(o, "accepted_tokens_total", "counter", "Draft tokens accepted and emitted (sum of timings.draft_n_accepted).",
         static_cast<double>(accepted_tokens_));
  header(o, "accepted_tokens_by_position_total", "counter",
         "Draft tokens accepted at each draft position (1 = first drafted token of a step).");
  for (const auto& [p, n] : accepted_by_position_) {
    o << "specchat:accepted_tokens_by_position_total{position=\"" << p << "\"} " << n << "\n";
  }
  header(o, "requests_total", "counter", "Requests by outcome.");
  for (const auto& [k, n] : requests_) o << "specchat:requests_total{outcome=\"" << k << "\"} " << n << "\n";
  scalar(o, "requests_processing", "gauge", "Requests being decoded now.", processing_);
  scalar(o, "requests_deferred", "gauge", "Requests waiting in the queue.", deferred_);
  scalar(o, "kv_cache_used_tokens", "gauge", "Target KV cache rows held by active requests.", static_cast<double>(kv_used_));
  scalar(o, "kv_cache_capacity_tokens", "gauge", "Target KV cache rows in the pool (sequences times context).",
         static_cast<double>(kv_capacity_));
  scalar(o, "resident_memory_bytes", "gauge", "Resident memory of the server process (RAM).", static_cast<double>(rss));
  scalar(o, "device_memory_used_bytes", "gauge", "GPU memory used (whole device; 0 on the CPU backend).",
         static_cast<double>(device_memory_));
  histogram(o, "time_to_first_token_seconds", "Time from a request's arrival to its first token.", ttft_);
  histogram(o, "time_per_output_token_seconds", "Decode time per generated token of a request (TPOT).", tpot_);
  histogram(o, "e2e_request_latency_seconds", "Time from a request's arrival to its last byte.", e2e_);
  histogram(o, "accepted_length_per_step", "Draft tokens accepted per verification step.", accepted_len_);
  // PIPO (approximate: nothing here was verified by the target).
  scalar(o, "pipo_requests_total", "counter",
         "PIPO (approximate) replies completed (timed-out and cancelled ones are in requests_total).",
         static_cast<double>(pipo_requests_));
  scalar(o, "pipo_steps_total", "counter", "PIPO decode steps (pairs appended by decoding).",
         static_cast<double>(pipo_.steps));
  scalar(o, "pipo_head_runs_total", "counter", "PIPO steps that ran the MTP and confidence heads.",
         static_cast<double>(pipo_.head_runs));
  scalar(o, "pipo_token2_accepted_total", "counter",
         "PIPO second tokens kept (confidence at least the acceptance threshold; not verified by the target).",
         static_cast<double>(pipo_.token2_accepted));
  scalar(o, "pipo_raw_tokens_total", "counter", "Tokens PIPO decoding emitted (PAD slots not counted).",
         static_cast<double>(pipo_.raw_tokens));
  scalar(o, "pipo_latent_pairs_total", "counter",
         "Latent pairs each PIPO reply's sequence held at its end (prompt and reply), summed.",
         static_cast<double>(pipo_.latent_pairs));
  scalar(o, "pipo_raw_length_tokens_total", "counter",
         "Raw tokens those latent pairs stand for, summed (over pipo_latent_pairs_total: the compression applied).",
         static_cast<double>(pipo_.raw_length));
  scalar(o, "pipo_fidelity_samples_total", "counter",
         "PIPO fidelity gauge samples (serve --pipo-fidelity N: 1 step in N compared with the plain target).",
         static_cast<double>(pipo_.fidelity_samples));
  scalar(o, "pipo_fidelity_kl_nats_total", "counter",
         "Sum over those samples of KL(plain target || PIPO) of token 1, in nats (over the samples: the mean).",
         pipo_.fidelity_kl_sum);
  scalar(o, "pipo_fidelity_kl_max_nats", "gauge", "The largest KL(plain target || PIPO) of token 1 sampled, in nats.",
         pipo_.fidelity_kl_max);
  scalar(o, "pipo_requests_processing", "gauge", "PIPO requests being decoded now (one at a time).", pipo_processing_);
  scalar(o, "pipo_requests_deferred", "gauge", "PIPO requests waiting for the PIPO unit.", pipo_deferred_);
  if (!pipo_release_.empty()) {
    header(o, "pipo_release_info", "gauge", "The PIPO release unit loaded (approximate mode), as a label.");
    o << "specchat:pipo_release_info{release=\"" << label_value(pipo_release_) << "\"} 1\n";
  }
  return o.str();
}

}  // namespace specchat::serve

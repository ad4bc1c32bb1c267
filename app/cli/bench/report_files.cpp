#include "app/cli/bench/report_files.h"

#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace specchat::bench {

using nlohmann::json;

json report_json(const BenchRun& run, const Aggregates& agg, const std::vector<std::string>& skipped) {
  json recs = json::array(), waves = json::array();
  for (const RequestRecord& r : run.records) recs.push_back(record_json(r));
  for (const WaveRecord& w : run.waves) waves.push_back(wave_json(w));
  return {{"format", "specchat-bench-report"}, {"version", 1},      {"meta", meta_json(run.meta)},
          {"records", recs},                   {"waves", waves},    {"aggregates", aggregates_json(agg)},
          {"skipped", skipped}};
}

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

template <typename T>
std::string joined(const std::vector<T>& v) {
  std::ostringstream o;
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ";" : "") << v[i];
  return o.str();
}

std::string num(double x) {
  std::ostringstream o;
  o.precision(10);
  o << x;
  return o.str();
}

}  // namespace

std::string per_request_csv(const BenchRun& run) {
  std::ostringstream o;
  o << "prompt_id,category,tier,bucket,config,concurrency,repeat,wave,input_tokens,max_tokens,output_tokens,"
       "steps,drafted,accepted,empty_drafts,ttft_ms,latency_ms,tpot_ms,user_tokens_per_s,accept_lengths,"
       "accepted_at,draft_steps,output_hash,identical,first_diff,error,approximate,"
       "fidelity_samples,fidelity_kl_sum,fidelity_kl_max\n";
  for (const RequestRecord& r : run.records) {
    o << csv_field(r.prompt_id) << ',' << csv_field(r.category) << ',' << r.tier << ',' << r.bucket << ','
      << csv_field(r.config) << ',' << r.concurrency << ',' << r.repeat << ',' << r.wave << ',' << r.input_tokens
      << ',' << r.max_tokens << ',' << r.output_tokens << ',' << r.steps << ',' << r.drafted << ',' << r.accepted
      << ',' << r.empty_drafts << ',' << num(r.ttft_ms) << ',' << num(r.latency_ms) << ',' << num(r.tpot_ms) << ','
      << num(r.user_tokens_per_s()) << ',' << joined(r.accept_lengths) << ',' << joined(r.accepted_at) << ','
      << r.draft_steps << ',' << r.output_hash << ',' << (r.identical ? 1 : 0) << ',' << r.first_diff << ','
      << csv_field(r.error) << ',' << (r.approximate ? 1 : 0) << ',' << r.fidelity_samples << ','
      << num(r.fidelity_kl_sum) << ',' << num(r.fidelity_kl_max) << '\n';
  }
  return o.str();
}

std::string summary_csv(const Aggregates& agg) {
  std::ostringstream o;
  o << "config,concurrency,kind,group,requests,failures,mean_input_tokens,tau,tau_ci_lo,tau_ci_hi,alpha,"
       "speedup_mean,speedup_ci_lo,speedup_ci_hi,speedup_p50,ttft_ms_mean,ttft_ms_p50,ttft_ms_p90,ttft_ms_p99,"
       "tpot_ms_mean,tpot_ms_p50,tpot_ms_p90,tpot_ms_p99,user_tokens_per_s_mean,position_acceptance,approximate,"
       "divergent,fidelity_samples,fidelity_kl_mean,fidelity_kl_max\n";
  for (const GroupAggregate& g : agg.groups) {
    o << csv_field(g.config) << ',' << g.concurrency << ',' << g.kind << ',' << csv_field(g.group) << ','
      << g.requests << ',' << g.failures << ',' << num(g.mean_input_tokens) << ',' << num(g.tau) << ','
      << num(g.tau_ci.lo) << ',' << num(g.tau_ci.hi) << ',' << num(g.alpha) << ',' << num(g.speedup.mean) << ','
      << num(g.speedup_ci.lo) << ',' << num(g.speedup_ci.hi) << ',' << num(g.speedup.p50) << ','
      << num(g.ttft_ms.mean) << ',' << num(g.ttft_ms.p50) << ',' << num(g.ttft_ms.p90) << ','
      << num(g.ttft_ms.p99) << ',' << num(g.tpot_ms.mean) << ',' << num(g.tpot_ms.p50) << ','
      << num(g.tpot_ms.p90) << ',' << num(g.tpot_ms.p99) << ',' << num(g.user_tokens_per_s.mean) << ','
      << joined(g.position_acceptance) << ',' << (g.approximate ? 1 : 0) << ',' << g.divergent << ','
      << g.fidelity_samples << ',' << num(g.fidelity_kl_mean) << ',' << num(g.fidelity_kl_max) << '\n';
  }
  return o.str();
}

LoadedReport load_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open report " + path);
  return parse_report(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), path);
}

LoadedReport parse_report(const std::string& text, const std::string& name) {
  const std::string& path = name;
  LoadedReport lr;
  struct TooDeep {};
  try {
    // Refused while parsing: values are copied below, and nlohmann copies recursively.
    const json j = json::parse(text, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxReportDepth) throw TooDeep{};
      return true;
    });
    const auto format = j.is_object() ? j.find("format") : j.end();
    const auto version = j.is_object() ? j.find("version") : j.end();
    if (!j.is_object() || format == j.end() || *format != "specchat-bench-report" || version == j.end() ||
        !version->is_number_integer() || *version != 1) {
      throw std::runtime_error(path + " is not a specchat-bench-report version 1");
    }
    lr.run.meta = meta_from_json(j.at("meta"));
    for (const json& r : j.at("records")) {
      lr.run.records.push_back(record_from_json(r));
      const RequestRecord& rec = lr.run.records.back();
      for (const std::string* s : {&rec.config, &rec.category, &rec.tier, &rec.prompt_id}) {
        if (s->size() > kMaxReportName)
          throw std::runtime_error(path + ": a record's name is " + std::to_string(s->size()) + " characters long (at most " +
                                   std::to_string(kMaxReportName) + ")");
      }
    }
    for (const json& w : j.at("waves")) lr.run.waves.push_back(wave_from_json(w));
    lr.aggregates = j.at("aggregates");
  } catch (const TooDeep&) {
    throw std::runtime_error(path + ": not a readable bench report (nested deeper than " +
                             std::to_string(kMaxReportDepth) + " levels)");
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": not a readable bench report (" + e.what() + ")");
  }
  return lr;
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

}  // namespace specchat::bench

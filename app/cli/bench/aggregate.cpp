#include "app/cli/bench/aggregate.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace specchat::bench {

using nlohmann::json;

namespace {

uint64_t fnv(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

using PairKey = std::tuple<std::string, int, int>;  // prompt, concurrency, repeat

GroupAggregate make_group(const std::string& config, int conc, const std::string& kind, const std::string& group,
                          const std::vector<const RequestRecord*>& recs, int failures,
                          const std::map<PairKey, double>& base_latency, const AggregateOptions& opt) {
  GroupAggregate g;
  g.config = config;
  g.concurrency = conc;
  g.kind = kind;
  g.group = group;
  g.requests = static_cast<int>(recs.size());
  g.failures = failures;
  std::vector<double> ttft, tpot, lat, tps, speed;
  double in_tokens = 0;
  long out = 0, tau_out = 0, steps = 0, drafted = 0, accepted = 0;
  size_t depth = 0;
  for (const RequestRecord* r : recs) {
    ttft.push_back(r->ttft_ms);
    if (r->output_tokens > 1) tpot.push_back(r->tpot_ms);
    lat.push_back(r->latency_ms);
    tps.push_back(r->user_tokens_per_s());
    in_tokens += r->input_tokens;
    out += r->output_tokens;
    tau_out += r->tau_tokens();
    steps += r->steps;
    drafted += r->drafted;
    accepted += r->accepted;
    depth = std::max(depth, r->accepted_at.size());
  }
  std::vector<double> speed_of(recs.size(), 0);
  std::vector<size_t> paired;  // indices into recs with a baseline partner
  for (size_t i = 0; i < recs.size(); ++i) {
    const auto it = base_latency.find({recs[i]->prompt_id, conc, recs[i]->repeat});
    if (it == base_latency.end() || recs[i]->latency_ms <= 0) continue;
    speed_of[i] = it->second / recs[i]->latency_ms;
    speed.push_back(speed_of[i]);
    paired.push_back(i);
  }
  g.mean_input_tokens = recs.empty() ? 0 : in_tokens / static_cast<double>(recs.size());
  g.ttft_ms = summarize(ttft);
  g.tpot_ms = summarize(tpot);
  g.latency_ms = summarize(lat);
  g.user_tokens_per_s = summarize(tps);
  g.tau = steps > 0 ? static_cast<double>(tau_out) / static_cast<double>(steps) : 0;
  g.alpha = drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0;
  for (size_t p = 0; p < depth; ++p) {
    long num = 0, den = 0;
    for (const RequestRecord* r : recs) {
      num += p < r->accepted_at.size() ? r->accepted_at[p] : 0;
      den += p == 0 ? r->draft_steps : (p - 1 < r->accepted_at.size() ? r->accepted_at[p - 1] : 0);
    }
    g.position_acceptance.push_back(den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0);
  }
  g.speedup = summarize(speed);
  const uint64_t seed = opt.seed ^ fnv(config + "|" + std::to_string(conc) + "|" + kind + "|" + group);
  g.tau_ci = bootstrap_ci(
      recs.size(),
      [&](const std::vector<size_t>& idx) {
        long o = 0, s = 0;
        for (size_t i : idx) {
          o += recs[i]->tau_tokens();
          s += recs[i]->steps;
        }
        return s > 0 ? static_cast<double>(o) / static_cast<double>(s) : 0.0;
      },
      opt.resamples, seed);
  g.speedup_ci = bootstrap_ci(
      paired.size(),
      [&](const std::vector<size_t>& idx) {
        double sum = 0;
        for (size_t i : idx) sum += speed_of[paired[i]];
        return sum / static_cast<double>(idx.size());
      },
      opt.resamples, seed + 1);
  return g;
}

}  // namespace

Aggregates aggregate(const BenchRun& run, const AggregateOptions& opt) {
  Aggregates a;
  std::map<PairKey, double> base_latency;
  for (const RequestRecord& r : run.records) {
    if (r.config == "baseline" && !r.failed()) base_latency[{r.prompt_id, r.concurrency, r.repeat}] = r.latency_ms;
  }
  // Groups keyed by (config, concurrency, kind, group), in order of first appearance.
  struct Bucket {
    std::vector<const RequestRecord*> recs;
    int failures = 0;
  };
  std::vector<std::tuple<std::string, int, std::string, std::string>> order;
  std::map<std::tuple<std::string, int, std::string, std::string>, Bucket> buckets;
  auto put = [&](const RequestRecord& r, const std::string& kind, const std::string& group) {
    const auto key = std::make_tuple(r.config, r.concurrency, kind, group);
    auto [it, fresh] = buckets.try_emplace(key);
    if (fresh) order.push_back(key);
    if (r.failed()) ++it->second.failures;
    else it->second.recs.push_back(&r);
  };
  for (const RequestRecord& r : run.records) {
    if (r.failed()) ++a.failures;
    put(r, "all", "all");
    put(r, "category", r.category);
    if (!r.tier.empty()) {
      put(r, "tier", r.tier);
      put(r, "tier_bucket", r.tier + "/" + std::to_string(r.bucket));
    }
  }
  // Listed group by group (in order of first appearance), and within a group by concurrency and
  // then configuration in the run's order: configurations rotate from wave to wave, so order of
  // first appearance alone swapped rows between groups (baseline first in one, last in another).
  std::map<std::string, size_t> config_rank;
  std::map<std::pair<std::string, std::string>, size_t> group_rank;
  for (const auto& key : order) {
    config_rank.try_emplace(std::get<0>(key), config_rank.size());
    group_rank.try_emplace({std::get<2>(key), std::get<3>(key)}, group_rank.size());
  }
  std::stable_sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
    const auto kx = std::make_tuple(group_rank.at({std::get<2>(x), std::get<3>(x)}), std::get<1>(x), config_rank.at(std::get<0>(x)));
    const auto ky = std::make_tuple(group_rank.at({std::get<2>(y), std::get<3>(y)}), std::get<1>(y), config_rank.at(std::get<0>(y)));
    return kx < ky;
  });
  for (const auto& key : order) {
    const Bucket& b = buckets[key];
    a.groups.push_back(make_group(std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), b.recs,
                                  b.failures, base_latency, opt));
    GroupAggregate& g = a.groups.back();
    double kl_sum = 0;
    for (const RequestRecord* r : b.recs) {
      g.approximate = g.approximate || r->approximate;
      if (r->approximate && !r->identical) ++g.divergent;
      g.fidelity_samples += r->fidelity_samples;
      kl_sum += r->fidelity_kl_sum;
      g.fidelity_kl_max = std::max(g.fidelity_kl_max, r->fidelity_kl_max);
    }
    g.fidelity_kl_mean = g.fidelity_samples > 0 ? kl_sum / g.fidelity_samples : 0;
  }
  std::vector<std::pair<std::string, int>> sorder;
  std::map<std::pair<std::string, int>, SystemAggregate> sys;
  for (const WaveRecord& w : run.waves) {
    const auto key = std::make_pair(w.config, w.concurrency);
    auto [it, fresh] = sys.try_emplace(key);
    if (fresh) {
      sorder.push_back(key);
      it->second.config = w.config;
      it->second.concurrency = w.concurrency;
    }
    ++it->second.waves;
    it->second.output_tokens += w.output_tokens;
    it->second.wall_ms += w.wall_ms;
  }
  for (const auto& key : sorder) {
    SystemAggregate s = sys[key];
    s.tokens_per_s = s.wall_ms > 0 ? static_cast<double>(s.output_tokens) / (s.wall_ms / 1000.0) : 0;
    a.system.push_back(s);
  }
  return a;
}

json aggregates_json(const Aggregates& a) {
  json groups = json::array();
  for (const GroupAggregate& g : a.groups) {
    groups.push_back({{"config", g.config}, {"concurrency", g.concurrency}, {"kind", g.kind}, {"group", g.group},
                      {"requests", g.requests}, {"failures", g.failures}, {"mean_input_tokens", g.mean_input_tokens},
                      {"approximate", g.approximate}, {"divergent", g.divergent},
                      {"fidelity_samples", g.fidelity_samples}, {"fidelity_kl_mean", g.fidelity_kl_mean},
                      {"fidelity_kl_max", g.fidelity_kl_max},
                      {"ttft_ms", summary_json(g.ttft_ms)}, {"tpot_ms", summary_json(g.tpot_ms)},
                      {"latency_ms", summary_json(g.latency_ms)},
                      {"user_tokens_per_s", summary_json(g.user_tokens_per_s)}, {"tau", g.tau},
                      {"tau_ci", interval_json(g.tau_ci)}, {"alpha", g.alpha},
                      {"position_acceptance", g.position_acceptance}, {"speedup", summary_json(g.speedup)},
                      {"speedup_ci", interval_json(g.speedup_ci)}});
  }
  json sys = json::array();
  for (const SystemAggregate& s : a.system) {
    sys.push_back({{"config", s.config}, {"concurrency", s.concurrency}, {"waves", s.waves},
                   {"output_tokens", s.output_tokens}, {"wall_ms", s.wall_ms}, {"tokens_per_s", s.tokens_per_s}});
  }
  return {{"groups", groups}, {"system", sys}, {"failures", a.failures}};
}

}  // namespace specchat::bench

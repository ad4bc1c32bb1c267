#include "app/cli/bench/diff.h"

#include <cstdio>
#include <map>
#include <random>
#include <tuple>

namespace specchat::bench {

namespace {

using Key = std::tuple<std::string, int, std::string>;

// Per-user tokens/s of the non-failed records of each (config, concurrency, group).
std::map<Key, std::vector<double>> samples(const BenchRun& run, std::vector<Key>* order) {
  std::map<Key, std::vector<double>> m;
  for (const RequestRecord& r : run.records) {
    if (r.failed()) continue;
    for (const std::string& g : {std::string("all"), r.category}) {
      const Key k{r.config, r.concurrency, g};
      auto [it, fresh] = m.try_emplace(k);
      if (fresh && order) order->push_back(k);
      it->second.push_back(r.user_tokens_per_s());
    }
  }
  return m;
}

}  // namespace

std::vector<DiffRow> diff_runs(const BenchRun& a, const BenchRun& b, const AggregateOptions& opt) {
  std::vector<Key> order;
  const auto sa = samples(a, &order);
  const auto sb = samples(b, nullptr);
  const Aggregates ga = aggregate(a, {2, opt.seed}), gb = aggregate(b, {2, opt.seed});
  auto find = [](const Aggregates& g, const Key& k) -> const GroupAggregate* {
    for (const GroupAggregate& x : g.groups) {
      if (x.config == std::get<0>(k) && x.concurrency == std::get<1>(k) &&
          (x.kind == "category" || x.kind == "all") && x.group == std::get<2>(k)) {
        return &x;
      }
    }
    return nullptr;
  };
  std::vector<DiffRow> rows;
  std::mt19937_64 rng(opt.seed);
  for (const Key& k : order) {
    const auto itb = sb.find(k);
    if (itb == sb.end()) continue;
    const std::vector<double>& xa = sa.at(k);
    const std::vector<double>& xb = itb->second;
    DiffRow d;
    d.config = std::get<0>(k);
    d.concurrency = std::get<1>(k);
    d.group = std::get<2>(k);
    d.n_a = static_cast<int>(xa.size());
    d.n_b = static_cast<int>(xb.size());
    d.tps_a = mean(xa);
    d.tps_b = mean(xb);
    d.change = d.tps_a > 0 ? d.tps_b / d.tps_a - 1 : 0;
    // Two-sample percentile bootstrap of mean(B) / mean(A) - 1.
    if (xa.size() >= 2 && xb.size() >= 2) {
      std::uniform_int_distribution<size_t> pa(0, xa.size() - 1), pb(0, xb.size() - 1);
      std::vector<double> stats;
      for (int r = 0; r < opt.resamples; ++r) {
        double s1 = 0, s2 = 0;
        for (size_t i = 0; i < xa.size(); ++i) s1 += xa[pa(rng)];
        for (size_t i = 0; i < xb.size(); ++i) s2 += xb[pb(rng)];
        const double m1 = s1 / static_cast<double>(xa.size()), m2 = s2 / static_cast<double>(xb.size());
        stats.push_back(m1 > 0 ? m2 / m1 - 1 : 0);
      }
      d.change_ci = {percentile(stats, 2.5), percentile(stats, 97.5)};
      d.significant = d.change_ci.lo > 0 || d.change_ci.hi < 0;
    } else {
      d.change_ci = {d.change, d.change};
    }
    if (const GroupAggregate* g = find(ga, k)) d.tau_a = g->tau, d.speedup_a = g->speedup.mean;
    if (const GroupAggregate* g = find(gb, k)) d.tau_b = g->tau, d.speedup_b = g->speedup.mean;
    rows.push_back(d);
  }
  return rows;
}

std::string diff_table(const std::vector<DiffRow>& rows) {
  std::string out;
  char buf[400];
  std::snprintf(buf, sizeof buf, "%-24s %4s %-14s %5s %5s %10s %10s %9s %20s %11s %13s\n", "config", "conc", "group",
                "n_A", "n_B", "tok/s A", "tok/s B", "change", "95% CI", "tau A->B", "speedup A->B");
  out += buf;
  for (const DiffRow& d : rows) {
    char ci[64];
    std::snprintf(ci, sizeof ci, "[%+.1f%%, %+.1f%%]", d.change_ci.lo * 100, d.change_ci.hi * 100);
    std::snprintf(buf, sizeof buf, "%-24s %4d %-14s %5d %5d %10.1f %10.1f %+8.1f%%%s %19s %5.2f->%-5.2f %6.2f->%-6.2f\n",
                  d.config.c_str(), d.concurrency, d.group.c_str(), d.n_a, d.n_b, d.tps_a, d.tps_b, d.change * 100,
                  d.significant ? "*" : " ", ci, d.tau_a, d.tau_b, d.speedup_a, d.speedup_b);
    out += buf;
  }
  out += "* = the 95% interval of the change in mean output tokens/s per user excludes 0 (percentile bootstrap).\n";
  return out;
}

nlohmann::json diff_json(const std::vector<DiffRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const DiffRow& d : rows) {
    a.push_back({{"config", d.config}, {"concurrency", d.concurrency}, {"group", d.group}, {"n_a", d.n_a},
                 {"n_b", d.n_b}, {"tokens_per_s_a", d.tps_a}, {"tokens_per_s_b", d.tps_b}, {"change", d.change},
                 {"change_ci", interval_json(d.change_ci)}, {"significant", d.significant}, {"tau_a", d.tau_a},
                 {"tau_b", d.tau_b}, {"speedup_a", d.speedup_a}, {"speedup_b", d.speedup_b}});
  }
  return {{"rows", a}};
}

}  // namespace specchat::bench

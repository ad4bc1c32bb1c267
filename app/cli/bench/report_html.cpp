#include "app/cli/bench/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "app/cli/bench/charts.h"
#include "app/cli/bench/suite.h"

namespace specchat::bench {

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

namespace {

std::string fmt(double x, int digits = 2) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << x;
  return o.str();
}

const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1500px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th{background:#f0f0f0}td.l,th.l{text-align:left}.fail{color:#a00;font-weight:bold}"
    ".plots{display:flex;flex-wrap:wrap;gap:12px}.plot{border:1px solid #ddd;margin:0;padding:4px}figcaption{font-size:13px;font-weight:bold;padding:2px 4px}.note{color:#555;font-size:13px}";

struct View {
  const BenchRun& run;
  const Aggregates& agg;
  int c0 = 1;                            // lowest concurrency
  std::vector<int> concs;
  std::vector<std::string> configs;      // in order, baseline first
  std::vector<std::string> spec;         // configs but baseline
  std::vector<std::string> categories;   // kind category, in order

  const GroupAggregate* find(const std::string& cfg, int conc, const std::string& kind, const std::string& group) const {
    for (const GroupAggregate& g : agg.groups) {
      if (g.config == cfg && g.concurrency == conc && g.kind == kind && g.group == group) return &g;
    }
    return nullptr;
  }
};

View make_view(const BenchRun& run, const Aggregates& agg) {
  View v{run, agg, 1, {}, {}, {}, {}};
  std::set<int> cs;
  for (const RequestRecord& r : run.records) {
    cs.insert(r.concurrency);
    if (std::find(v.configs.begin(), v.configs.end(), r.config) == v.configs.end()) v.configs.push_back(r.config);
    if (std::find(v.categories.begin(), v.categories.end(), r.category) == v.categories.end()) v.categories.push_back(r.category);
  }
  v.concs.assign(cs.begin(), cs.end());
  v.c0 = v.concs.empty() ? 1 : v.concs.front();
  auto it = std::find(v.configs.begin(), v.configs.end(), "baseline");
  if (it != v.configs.end()) std::rotate(v.configs.begin(), it, it + 1);
  for (const std::string& c : v.configs) {
    if (c != "baseline") v.spec.push_back(c);
  }
  return v;
}

void header(std::ostringstream& o, const RunMeta& m) {
  auto row = [&](const std::string& k, const std::string& val) {
    o << "<tr><th class=\"l\">" << html_escape(k) << "</th><td class=\"l\">" << html_escape(val) << "</td></tr>\n";
  };
  o << "<table class=\"meta\">\n";
  row("date (UTC)", m.date_utc);
  row("SpecChat commit", m.git_commit);
  row("CPU", m.cpu_model + " (" + std::to_string(m.cpu_cores) + " logical cores)");
  row("GPU", m.gpu);
  row("backend", m.backend);
  row("target model", m.target_model + "  sha256 " + m.target_sha256);
  row("draft model", m.draft_model + "  sha256 " + m.draft_sha256);
  row("suite", m.suite_name + " (" + m.suite_path + ")");
  row("settings", m.settings.dump());
  if (m.truncated) row("note", "stopped early by --max-time or Stop: not every prompt ran");
  o << "</table>\n";
}

// One figure: the caption in HTML (searchable, read by screen readers), the chart as SVG.
void plot(std::ostringstream& o, const std::string& caption, const std::string& svg) {
  o << "<figure class=\"plot\"><figcaption>" << html_escape(caption) << "</figcaption>" << svg << "</figure>\n";
}

BoxValue five(std::vector<double> v) {
  if (v.empty()) return {};
  return {percentile(v, 1), percentile(v, 25), percentile(v, 50), percentile(v, 75), percentile(v, 99)};
}

}  // namespace

std::string report_html(const BenchRun& run, const Aggregates& agg, const std::vector<std::string>& skipped) {
  const View v = make_view(run, agg);
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>SpecChat benchmark: "
    << html_escape(run.meta.suite_name) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  o << "<h1>SpecChat benchmark: " << html_escape(run.meta.suite_name) << "</h1>\n";
  header(o, run.meta);
  o << "<p class=\"note\">Speedup = baseline latency / configuration latency on the same prompt, concurrency "
       "and repeat (end to end, both models' prefill included). τ = output tokens per target step; α = accepted / "
       "drafted. Intervals are 95% percentile-bootstrap intervals over requests. Greedy decoding: every "
       "speculative output must equal baseline's, token for token.</p>\n";
  // Approximate configurations (PIPO): labelled, with their divergence from baseline.
  {
    struct Approx {
      int n = 0, diff = 0, samples = 0;  // requests, differing from baseline, fidelity samples
      double kl_sum = 0, kl_max = 0;
    };
    std::map<std::string, Approx> approx;  // by config
    for (const RequestRecord& r : run.records) {
      if (!r.approximate || !r.error.empty()) continue;
      Approx& a = approx[r.config];
      ++a.n;
      if (!r.identical) ++a.diff;
      a.samples += r.fidelity_samples;
      a.kl_sum += r.fidelity_kl_sum;
      a.kl_max = std::max(a.kl_max, r.fidelity_kl_max);
    }
    for (const auto& [cfg, a] : approx) {
      o << "<p class=\"fail\">APPROXIMATE: " << html_escape(cfg)
        << " is not verified by the target (PIPO dual-end mode); " << a.diff << " of " << a.n
        << " outputs differ from baseline. Its speedups trade exactness for speed.";
      if (a.samples > 0) {
        char b[160];
        std::snprintf(b, sizeof b, " Fidelity: KL(plain target || PIPO) of token 1 %.3f nats mean, %.3f max, over %d sampled steps.",
                      a.kl_sum / a.samples, a.kl_max, a.samples);
        o << b;
      }
      o << "</p>\n";
    }
  }
  // Failures.
  std::vector<const RequestRecord*> failed;
  for (const RequestRecord& r : run.records) {
    if (r.failed()) failed.push_back(&r);
  }
  if (failed.empty()) {
    o << "<p>Failures: none (" << run.records.size() << " requests, every speculative output identical to baseline).</p>\n";
  } else {
    o << "<p class=\"fail\">FAILURES: " << failed.size()
      << " requests differ from baseline or failed; they are left out of every aggregate.</p>\n<table>\n"
         "<tr><th class=\"l\">prompt</th><th class=\"l\">config</th><th>concurrency</th><th>repeat</th>"
         "<th>first difference (token)</th><th class=\"l\">error</th></tr>\n";
    for (const RequestRecord* r : failed) {
      o << "<tr><td class=\"l\">" << html_escape(r->prompt_id) << "</td><td class=\"l\">" << html_escape(r->config)
        << "</td><td>" << r->concurrency << "</td><td>" << r->repeat << "</td><td>" << r->first_diff
        << "</td><td class=\"l\">" << html_escape(r->error) << "</td></tr>\n";
    }
    o << "</table>\n";
  }
  if (!skipped.empty()) {
    o << "<p class=\"note\">Skipped prompts: ";
    for (size_t i = 0; i < skipped.size(); ++i) o << (i ? "; " : "") << html_escape(skipped[i]);
    o << "</p>\n";
  }
  const std::string at = " (concurrency " + std::to_string(v.c0) + ")";
  o << "<h2>Per category</h2>\n<div class=\"plots\">\n";
  {
    std::vector<BoxSeries> sp;
    std::vector<ChartSeries> tau, alpha;
    for (const std::string& c : v.spec) {
      BoxSeries b{c, {}};
      ChartSeries t{c, {}}, a{c, {}};
      for (const std::string& cat : v.categories) {
        const GroupAggregate* g = v.find(c, v.c0, "category", cat);
        if (g) b.boxes.push_back({g->speedup_ci.lo, g->speedup_ci.lo, g->speedup.mean, g->speedup_ci.hi, g->speedup_ci.hi});
        else b.boxes.push_back({});
        t.values.push_back(g ? g->tau : NAN);
        a.values.push_back(g ? g->alpha : NAN);
      }
      sp.push_back(std::move(b));
      tau.push_back(std::move(t));
      alpha.push_back(std::move(a));
    }
    plot(o, "Speedup over baseline by category" + at + ": mean (line) and 95% CI (box)", box_chart_svg("", v.categories, sp,
                          "speedup (x)", {1000, 420}));
    plot(o, "τ (tokens per target step) by category" + at, bar_chart_svg("", v.categories, tau, "τ", {1000, 400}));
    plot(o, "α (acceptance rate) by category" + at, bar_chart_svg("", v.categories, alpha, "α", {1000, 400}));
  }
  o << "</div>\n<h2>Acceptance and throughput</h2>\n<div class=\"plots\">\n";
  {
    size_t depth = 0;
    for (const std::string& c : v.spec) {
      if (const GroupAggregate* g = v.find(c, v.c0, "all", "all")) depth = std::max(depth, g->position_acceptance.size());
    }
    std::vector<double> xs;
    for (size_t p = 1; p <= depth; ++p) xs.push_back(static_cast<double>(p));
    std::vector<ChartSeries> pos;
    for (const std::string& c : v.spec) {
      ChartSeries s{c, std::vector<double>(depth, NAN)};
      if (const GroupAggregate* g = v.find(c, v.c0, "all", "all")) {
        for (size_t p = 0; p < g->position_acceptance.size(); ++p) s.values[p] = g->position_acceptance[p];
      }
      pos.push_back(std::move(s));
    }
    plot(o, "Acceptance by draft position" + at + " (given the positions before it)", line_chart_svg("", xs, pos,
                           "draft position", "acceptance"));
    std::vector<double> cx(v.concs.begin(), v.concs.end());
    std::vector<ChartSeries> tps;
    for (const std::string& c : v.configs) {
      ChartSeries s{c, std::vector<double>(cx.size(), NAN)};
      for (const SystemAggregate& sa : agg.system) {
        if (sa.config != c) continue;
        const auto it = std::find(v.concs.begin(), v.concs.end(), sa.concurrency);
        if (it != v.concs.end()) s.values[static_cast<size_t>(it - v.concs.begin())] = sa.tokens_per_s;
      }
      tps.push_back(std::move(s));
    }
    plot(o, "Output tokens/s of the system against concurrency", line_chart_svg("", cx, tps, "concurrent requests",
                           "tokens/s"));
  }
  o << "</div>\n<h2>Latency distributions</h2>\n<div class=\"plots\">\n";
  {
    std::vector<std::string> cats;
    BoxSeries ttft{"TTFT (ms)", {}}, tpot{"TPOT (ms)", {}};
    for (const std::string& c : v.configs) {
      for (int conc : v.concs) {
        std::vector<double> a, b;
        for (const RequestRecord& r : run.records) {
          if (r.failed() || r.config != c || r.concurrency != conc) continue;
          a.push_back(r.ttft_ms);
          if (r.output_tokens > 1) b.push_back(r.tpot_ms);
        }
        cats.push_back(c + " @" + std::to_string(conc));
        ttft.boxes.push_back(five(a));
        tpot.boxes.push_back(five(b));
      }
    }
    plot(o, "TTFT by configuration @ concurrency (whiskers p1 and p99)", box_chart_svg("", cats, {ttft}, "ms", {720, 420}));
    plot(o, "TPOT by configuration @ concurrency (whiskers p1 and p99)", box_chart_svg("", cats, {tpot}, "ms", {720, 420}));
  }
  o << "</div>\n<h2>Input length</h2>\n";
  {
    std::set<int> buckets;
    for (const RequestRecord& r : run.records) {
      if (!r.tier.empty()) buckets.insert(r.bucket);
    }
    if (buckets.empty()) {
      o << "<p class=\"note\">No throughput prompts (tier × input-length bucket) in this run: the speedup against "
           "input length needs the throughput suite (resources/bench/throughput.json).</p>\n";
    } else {
      std::vector<double> xs(buckets.begin(), buckets.end());
      std::vector<ChartSeries> lines;
      for (const std::string& c : v.spec) {
        for (const std::string& tier : entropy_tiers()) {
          ChartSeries s{c + " " + tier, {}};
          bool any = false;
          for (int b : buckets) {
            const GroupAggregate* g = v.find(c, v.c0, "tier_bucket", std::string(tier) + "/" + std::to_string(b));
            s.values.push_back(g && g->requests > 0 ? g->speedup.mean : NAN);
            any = any || (g && g->requests > 0);
          }
          if (any) lines.push_back(std::move(s));
        }
      }
      o << "<div class=\"plots\">\n";
      plot(o, "Speedup against input length by entropy tier" + at, line_chart_svg("", xs, lines, "input bucket (tokens)",
                             "speedup (x)", {1000, 420}));
      o << "</div>\n";
    }
  }
  // Table.
  o << "<h2>Table</h2>\n<table>\n<tr><th class=\"l\">group</th><th class=\"l\">config</th><th>concurrency</th>"
       "<th>requests</th><th>failures</th><th>τ [95% CI]</th><th>α</th><th>speedup [95% CI]</th><th>TTFT p50 "
       "(ms)</th><th>TPOT p50 (ms)</th><th>TPOT p90</th><th>TPOT p99</th></tr>\n";
  for (const GroupAggregate& g : agg.groups) {
    if (g.kind == "tier_bucket") continue;
    o << "<tr><td class=\"l\">" << html_escape(g.kind == "all" ? "all" : g.group) << "</td><td class=\"l\">"
      << html_escape(g.config) << "</td><td>" << g.concurrency << "</td><td>" << g.requests << "</td><td>"
      << g.failures << "</td><td>" << fmt(g.tau) << " [" << fmt(g.tau_ci.lo) << ", " << fmt(g.tau_ci.hi)
      << "]</td><td>" << fmt(g.alpha, 3) << "</td><td>" << fmt(g.speedup.mean) << " [" << fmt(g.speedup_ci.lo)
      << ", " << fmt(g.speedup_ci.hi) << "]</td><td>" << fmt(g.ttft_ms.p50, 1) << "</td><td>" << fmt(g.tpot_ms.p50)
      << "</td><td>" << fmt(g.tpot_ms.p90) << "</td><td>" << fmt(g.tpot_ms.p99) << "</td></tr>\n";
  }
  o << "</table>\n</body>\n</html>\n";
  return o.str();
}

}  // namespace specchat::bench

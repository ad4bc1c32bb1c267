#include "app/cli/bench/runner.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace specchat::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Prepared {
  const BenchPrompt* prompt;
  std::vector<int32_t> ids;
  int max_tokens;
};

int max_depth(const std::vector<BenchConfig>& cs) {
  int d = 0;
  for (const BenchConfig& c : cs) {
    if (c.baseline()) continue;
    d = std::max(d, c.settings.tree == TreeMode::chain ? c.settings.draft_k : c.settings.depth);
  }
  return d;
}

// Fills the per-step acceptance fields from a finished result. A PIPO step (approximate) emits
// token 1 then the head's token 2, at most one "draft" a step.
void fill_acceptance(RequestRecord& r, const GenerationResult& res, int depth, bool approximate) {
  const GenerationStats& st = res.stats;
  r.output_tokens = st.n_generated;
  r.steps = st.n_steps;
  r.target_tokens = st.n_target_tokens;
  r.drafted = st.n_drafted;
  r.accepted = st.n_accepted;
  r.empty_drafts = st.n_empty_drafts;
  r.accept_lengths = accept_lengths_from_flags(res.drafted, approximate ? DraftOrder::token_then_draft
                                                                        : DraftOrder::drafts_then_token);
  if (approximate) depth = 1;
  r.draft_steps = st.n_drafted > 0 ? st.n_steps - st.n_empty_drafts : 0;
  r.accepted_at.assign(static_cast<size_t>(r.drafted > 0 ? depth : 0), 0);
  for (int a : r.accept_lengths) {
    for (int p = 0; p < a && p < static_cast<int>(r.accepted_at.size()); ++p) ++r.accepted_at[static_cast<size_t>(p)];
  }
  r.output_hash = token_hash(res.tokens);
}

}  // namespace

BenchRun run_suite(BenchBackend& be, const BenchSuite& suite, const RunOptions& opt, const ProgressFn& progress,
                   std::vector<std::string>* skipped) {
  if (opt.configs.empty() || !opt.configs.front().baseline()) {
    throw std::invalid_argument("bench: the configurations must start with baseline");
  }
  if (opt.repeat < 1) throw std::invalid_argument("bench: --repeat must be at least 1");
  if (opt.concurrency.empty()) throw std::invalid_argument("bench: no concurrency level");
  for (int c : opt.concurrency) {
    if (c < 1 || c > be.capacity()) {
      throw std::invalid_argument("bench: concurrency " + std::to_string(c) + " outside 1.." +
                                  std::to_string(be.capacity()));
    }
  }
  const int depth = max_depth(opt.configs);
  std::vector<Prepared> prompts;
  for (const BenchPrompt& p : suite.prompts) {
    std::vector<int32_t> ids = be.encode(p, suite.prompt_format);
    const int room = be.n_ctx() - static_cast<int>(ids.size()) - depth - 1;
    if (room < 1) {
      if (skipped) skipped->push_back(p.id + ": " + std::to_string(ids.size()) + " tokens leave no room in the context");
      continue;
    }
    prompts.push_back({&p, std::move(ids), std::min(opt.max_tokens, room)});
  }
  BenchRun run;
  const auto t_run = Clock::now();
  const long total = static_cast<long>(prompts.size() * opt.configs.size() * opt.concurrency.size()) * opt.repeat;
  long done = 0;
  bool stop = false;
  for (int rep = 0; rep < opt.repeat && !stop; ++rep) {
    for (int conc : opt.concurrency) {
      if (stop) break;
      for (size_t w0 = 0, wave = 0; w0 < prompts.size(); w0 += static_cast<size_t>(conc), ++wave) {
        const double elapsed = ms_between(t_run, Clock::now()) / 1000.0;
        if ((opt.max_time_s > 0 && elapsed > opt.max_time_s) || (opt.cancel && opt.cancel->load())) {
          stop = true;
          run.meta.truncated = true;
          break;
        }
        const size_t w1 = std::min(prompts.size(), w0 + static_cast<size_t>(conc));
        // Tokens of every configuration for the identity check, [config][prompt in wave].
        std::vector<std::vector<std::vector<int32_t>>> outputs(opt.configs.size());
        std::vector<std::vector<size_t>> rec_index(opt.configs.size());
        for (size_t k = 0; k < opt.configs.size(); ++k) {
          const size_t ci = (k + wave) % opt.configs.size();  // rotate the order per wave
          const BenchConfig& cfg = opt.configs[ci];
          be.clear_cache();
          const size_t n = w1 - w0;
          std::vector<int64_t> ids(n);
          std::vector<Clock::time_point> first(n), last(n);
          std::vector<bool> got_first(n, false);
          std::vector<RequestRecord> recs(n);
          std::vector<GenerateRequest> reqs(n);
          for (size_t i = 0; i < n; ++i) {
            const Prepared& pp = prompts[w0 + i];
            GenerateRequest& req = reqs[i];
            req.prompt = pp.ids;
            req.max_tokens = pp.max_tokens;
            req.sampling.temperature = 0;
            req.spec = be.plan(cfg, pp.ids);
          }
          const auto t0 = Clock::now();  // every request of the wave is queued now
          for (size_t i = 0; i < n; ++i) {
            RequestRecord& r = recs[i];
            const Prepared& pp = prompts[w0 + i];
            r.approximate = cfg.approximate();
            r.prompt_id = pp.prompt->id;
            r.category = pp.prompt->category;
            r.tier = pp.prompt->tier;
            r.bucket = pp.prompt->bucket;
            r.config = cfg.name;
            r.concurrency = conc;
            r.repeat = rep;
            r.wave = static_cast<int>(wave);
            r.input_tokens = static_cast<int>(pp.ids.size());
            r.max_tokens = pp.max_tokens;
            ids[i] = -1;
            try {
              ids[i] = be.submit_config(cfg, *pp.prompt, reqs[i], [&, i](const TokenEvent&) {
                last[i] = Clock::now();
                if (!got_first[i]) {
                  got_first[i] = true;
                  first[i] = last[i];
                }
              });
            } catch (const std::exception& e) {
              r.error = e.what();
            }
          }
          std::vector<GenerationResult> results(n);
          std::vector<ApproxMonitor> monitors(n);
          std::vector<bool> open(n);
          for (size_t i = 0; i < n; ++i) open[i] = ids[i] >= 0;
          while (std::any_of(open.begin(), open.end(), [](bool b) { return b; })) {
            be.step();
            for (size_t i = 0; i < n; ++i) {
              if (!open[i] || !be.finished(ids[i])) continue;
              open[i] = false;
              if (!got_first[i]) last[i] = first[i] = Clock::now();
              try {
                results[i] = be.take(ids[i]);
                monitors[i] = be.take_monitor(ids[i]);
              } catch (const std::exception& e) {
                recs[i].error = e.what();
              }
            }
          }
          WaveRecord wr;
          wr.config = cfg.name;
          wr.concurrency = conc;
          wr.repeat = rep;
          wr.wave = static_cast<int>(wave);
          wr.requests = static_cast<int>(n);
          for (size_t i = 0; i < n; ++i) {
            RequestRecord& r = recs[i];
            if (r.error.empty()) {
              fill_acceptance(r, results[i], depth, cfg.approximate());
              // The fidelity gauge's plain forwards are monitoring, not the configuration's speed.
              const ApproxMonitor& m = monitors[i];
              r.fidelity_samples = m.samples;
              r.fidelity_kl_sum = m.kl_sum;
              r.fidelity_kl_max = m.kl_max;
              r.ttft_ms = std::max(0.0, ms_between(t0, first[i]) - m.before_first_ms);
              r.latency_ms = std::max(r.ttft_ms, ms_between(t0, last[i]) - m.total_ms);
              r.tpot_ms = r.output_tokens > 1 ? (r.latency_ms - r.ttft_ms) / (r.output_tokens - 1) : 0;
              wr.output_tokens += r.output_tokens;
              // The wave ends with its last request, the fidelity gauge's time left out.
              wr.wall_ms = std::max(wr.wall_ms, r.latency_ms);
            }
            outputs[ci].push_back(std::move(results[i].tokens));
            rec_index[ci].push_back(run.records.size());
            run.records.push_back(std::move(r));
            ++done;
          }
          run.waves.push_back(wr);
          if (progress) progress(done, total, ms_between(t_run, Clock::now()) / 1000.0);
        }
        // Identity against baseline (configs[0]), token for token, for this wave's prompts
        // (every configuration has run them now).
        for (size_t ci = 1; ci < opt.configs.size(); ++ci) {
          for (size_t i = outputs[ci].size() - (w1 - w0); i < outputs[ci].size(); ++i) {
            RequestRecord& r = run.records[rec_index[ci][i]];
            const RequestRecord& b = run.records[rec_index[0][i]];
            if (!r.error.empty() || !b.error.empty()) continue;
            const auto& x = outputs[ci][i];
            const auto& y = outputs[0][i];
            if (x == y) continue;
            r.identical = false;
            const auto mm = std::mismatch(x.begin(), x.end(), y.begin(), y.end());
            r.first_diff = static_cast<int>(mm.first - x.begin());
          }
        }
        if (opt.on_wave) opt.on_wave(run);
      }
    }
  }
  return run;
}

}  // namespace specchat::bench

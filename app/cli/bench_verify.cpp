// `specchat-cli bench --verify-cost`: how much a verification forward of k rows costs against a
// one-row decode forward, on the target alone (issue 10's "verify cost" table).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/bench.h"
#include "app/cli/report.h"
#include "engine/model.h"
#include "engine/model_pair.h"
#include "kernels/cpu/linear.h"

namespace specchat::cli {

using nlohmann::json;

int cmd_bench_verify(BenchOptions& o) {
  CommonOptions& c = o.common;
  LlamaModel::Options mo;
  mo.n_threads = c.threads;
  mo.backend = parse_backend(c.backend);
  const std::string path = c.model.empty() ? bundled_target_path() : c.model;
  auto m = LlamaModel::load(path, mo);
  const int n_ctx = m->n_ctx();
  const std::vector<int> ks = {1, 2, 4, 8, 16, 32, 64};
  const int kmax = std::min(m->max_batch(), 64);
  // A context of ~half the window (at most 256 tokens) so attention has a realistic prefix.
  const int n_prefix = std::min(256, n_ctx / 2);
  std::vector<int32_t> prefix(static_cast<size_t>(n_prefix));
  for (int i = 0; i < n_prefix; ++i) prefix[static_cast<size_t>(i)] = i == 0 ? 1 : 3 + (i * 131) % (m->config().n_vocab - 3);
  m->sync_cache(prefix, n_prefix, false);
  if (n_prefix + kmax > n_ctx) throw std::runtime_error("bench --verify-cost: the context is too short");
  auto batch = [&](int k) {
    std::vector<int32_t> toks(static_cast<size_t>(k));
    for (int i = 0; i < k; ++i) toks[static_cast<size_t>(i)] = 3 + (i * 977) % (m->config().n_vocab - 3);
    return Batch::chain(toks, n_prefix, true);  // every row returns logits, as in verification
  };
  std::vector<Batch> batches;
  for (int k : ks) batches.push_back(batch(std::min(k, kmax)));
  const int reps = std::max(3, o.max_prompts);
  std::vector<std::vector<double>> ms(ks.size());
  for (const Batch& b : batches) m->forward(b);  // warm-up
  // Round robin over k, so machine noise hits every size alike; the median of reps. Each timed
  // forward follows an untimed one of the same size, as in a run of decode or verification
  // steps: timed right after the 64-row forward, the one-row forward found its weights partly
  // evicted and measured slower than two rows (0.59-0.61 against 0.52-0.56 ms), which made
  // every ratio look better than it is.
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < ks.size(); ++i) {
      m->forward(batches[i]);
      const auto t0 = std::chrono::steady_clock::now();
      m->forward(batches[i]);
      ms[i].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double t1 = median(ms[0]);
  std::printf("model %s (%s weights: %.1f MB), kernel %s, %d reps, prefix %d\n", path.c_str(),
              m->backend_kind() == BackendKind::cpu ? "CPU" : "CUDA", m->memory().weights_bytes / 1e6,
              cpu::linear_isa(), reps, n_prefix);
  std::printf("%6s %12s %12s\n", "rows", "ms/forward", "vs 1 row");
  json rows = json::array();
  for (size_t i = 0; i < ks.size(); ++i) {
    const double t = median(ms[i]);
    std::printf("%6d %12.3f %11.2fx\n", ks[i], t, t / t1);
    rows.push_back({{"rows", ks[i]}, {"ms", t}, {"ratio", t / t1}});
  }
  if (!o.out.empty()) {
    write_report_json(o.out, json{{"model", path}, {"reps", reps}, {"prefix", n_prefix}, {"kernel", cpu::linear_isa()}, {"rows", rows}});
  }
  return 0;
}

}  // namespace specchat::cli

// specchat-gpu-bench: the GPU check's measurements (docs/perf/gpu.md). Prints a table and, with
// --json PATH, writes the same rows as JSON.
//   (a) every CUDA op vs its CPU twin: max normalized error and device time
//   (b) bundled pair and a random 7B-shaped F16 model: decode tok/s, GB/s vs the device's
//       bandwidth, tree verification (1, 8, 16, 32, 64 nodes) relative to a 1-token decode
//   (c) bundled pair: GPU vs CPU logits, greedy speculative == baseline on the GPU (chain and
//       tree), draft on GPU vs CPU
// Exit codes: 0 all checks passed, 1 a check failed, 2 bad arguments or no usable device,
// 3 a device or engine error. Depends only on the engine and kernels (no tokenizer, Qt,
// SQLite, CLI11 or JSON library: the GPU machine has none of them).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>

#include "app/gpu_bench/bench.h"
#include "kernels/cuda/check.h"

namespace {

void usage() {
  std::printf(
      "usage: specchat-gpu-bench [--json PATH] [--models DIR] [--no-7b] [--only ops|models|pair]\n"
      "  --json PATH   also write the results as JSON\n"
      "  --models DIR  where specchat-target.gguf and specchat-draft.gguf are\n"
      "                (default: $SPECCHAT_MODELS, else resources/models)\n"
      "  --no-7b       skip the random 7B-shaped model (needs ~17 GB of device memory)\n"
      "  --only S      run one section\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, only;
  std::string models = std::getenv("SPECCHAT_MODELS") ? std::getenv("SPECCHAT_MODELS") : "resources/models";
  bool with_7b = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "specchat-gpu-bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--json") json_path = value();
    else if (a == "--models") models = value();
    else if (a == "--no-7b") with_7b = false;
    else if (a == "--only") only = value();
    else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "specchat-gpu-bench: unknown argument '%s'\n", a.c_str());
      usage();
      return 2;
    }
  }
  if (!only.empty() && only != "ops" && only != "models" && only != "pair") {
    std::fprintf(stderr, "specchat-gpu-bench: --only takes ops, models or pair\n");
    return 2;
  }
  std::string why;
  if (!specchat::cuda::device_available(&why)) {
    std::fprintf(stderr, "specchat-gpu-bench: no usable CUDA device: %s\n", why.c_str());
    return 2;
  }
  specchat::bench::Report rep;
  bool ok = true;
  int rc = 0;
  try {
    if (only.empty() || only == "ops") ok = specchat::bench::bench_ops(rep) && ok;
    if (only.empty() || only == "models") ok = specchat::bench::bench_models(rep, models, with_7b) && ok;
    if (only.empty() || only == "pair") ok = specchat::bench::bench_pair(rep, models) && ok;
    rc = ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specchat-gpu-bench: error: %s\n", e.what());
    rep.section("error").push_back(specchat::bench::Row().str("message", e.what()));
    rc = 3;
  }
  rep.section("summary").push_back(specchat::bench::Row().boolean("all_checks_passed", rc == 0).num("exit_code", rc));
  std::printf("\n%s\n", rc == 0 ? "all checks passed" : rc == 1 ? "SOME CHECKS FAILED" : "ABORTED by an error");
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << rep.json();
    if (!out) {
      std::fprintf(stderr, "specchat-gpu-bench: cannot write %s\n", json_path.c_str());
      return rc ? rc : 3;
    }
  }
  return rc;
}

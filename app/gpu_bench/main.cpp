// specchat-gpu-bench: the GPU check's measurements (docs/perf/gpu.md). Prints a table and, with
// --json PATH, writes the same rows as JSON.
//   (a) every CUDA op vs its CPU twin: max normalized error and device time
//   (b) bundled pair and a random 7B-shaped F16 model: decode tok/s, GB/s vs the device's
//       bandwidth, tree verification (1, 8, 16, 32, 64 nodes) relative to a 1-token decode
//   (c) bundled pair: GPU vs CPU logits, greedy speculative == baseline on the GPU (chain and
//       tree), draft on GPU vs CPU
//   (d) every drafter (draft model, DFlash block drafter, MTP head) on the held-out prompts:
//       tau and decode tokens/s against plain decoding (issue 13's table), identity checked
// Exit codes: 0 all checks passed, 1 a check failed, 2 bad arguments or no usable device,
// 3 a device or engine error. Depends only on the engine and kernels (no tokenizer, Qt,
// SQLite, CLI11 or JSON library: the GPU machine has none of them).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/gpu_bench/bench.h"
#include "kernels/cuda/check.h"

namespace {

void usage() {
  std::printf(
      "usage: specchat-gpu-bench [--json PATH] [--models DIR] [--no-7b] [--only ops|models|pair|spec]\n"
      "                          [--prompts FILE] [--max-prompts N] [-n N] [--backend cuda|cpu]\n"
      "  --json PATH        also write the results as JSON\n"
      "  --models DIR       where specchat-{target,draft,dflash,mtp}.gguf are\n"
      "                     (default: $SPECCHAT_MODELS, else resources/models)\n"
      "  --no-7b            skip the random 7B-shaped model (needs ~17 GB of device memory)\n"
      "  --only S           run one section\n"
      "  --prompts FILE     section spec: pre-encoded prompts (default resources/bench/heldout-prompt-ids.txt)\n"
      "  --max-prompts N    section spec: the first N prompts (default 12)\n"
      "  -n N               section spec: tokens per prompt and configuration (default 64)\n"
      "  --backend cpu      section spec only: the target on the CPU (the same table without a device)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, only;
  std::string models = std::getenv("SPECCHAT_MODELS") ? std::getenv("SPECCHAT_MODELS") : "resources/models";
  bool with_7b = true;
  specchat::bench::SpecRun spec;
  spec.prompts_path = "resources/bench/heldout-prompt-ids.txt";
  std::string backend = "cuda";
  // A whole number in [lo, hi] or exit 2.
  auto count = [](const std::string& flag, const std::string& v, int lo, int hi) {
    try {
      size_t used = 0;
      const long x = std::stol(v, &used);
      if (used == v.size() && x >= lo && x <= hi) return static_cast<int>(x);
    } catch (const std::exception&) {
    }
    std::fprintf(stderr, "specchat-gpu-bench: %s takes a whole number in [%d, %d], not '%s'\n", flag.c_str(), lo, hi, v.c_str());
    std::exit(2);
  };
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
    else if (a == "--prompts") spec.prompts_path = value();
    else if (a == "--max-prompts") spec.max_prompts = count(a, value(), 1, 1000);
    else if (a == "-n") spec.n = count(a, value(), 1, 4096);
    else if (a == "--backend") backend = value();
    else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "specchat-gpu-bench: unknown argument '%s'\n", a.c_str());
      usage();
      return 2;
    }
  }
  if (!only.empty() && only != "ops" && only != "models" && only != "pair" && only != "spec") {
    std::fprintf(stderr, "specchat-gpu-bench: --only takes ops, models, pair or spec\n");
    return 2;
  }
  if (backend != "cuda" && backend != "cpu") {
    std::fprintf(stderr, "specchat-gpu-bench: --backend takes cuda or cpu\n");
    return 2;
  }
  if (backend == "cpu" && only != "spec") {
    std::fprintf(stderr, "specchat-gpu-bench: --backend cpu runs section spec only (add --only spec)\n");
    return 2;
  }
  // The JSON is written after the whole run: a path that cannot take it fails now, not then.
  if (!json_path.empty()) {
    const bool existed = std::ifstream(json_path).good();
    if (std::filesystem::is_directory(json_path) || !std::ofstream(json_path, std::ios::app)) {
      std::fprintf(stderr, "specchat-gpu-bench: cannot write --json %s\n", json_path.c_str());
      return 2;
    }
    if (!existed) std::filesystem::remove(json_path);
  }
  spec.models_dir = models;
  spec.backend = backend == "cpu" ? specchat::BackendKind::cpu : specchat::BackendKind::cuda;
  std::string why;
  if (spec.backend == specchat::BackendKind::cuda && !specchat::cuda::device_available(&why)) {
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
    if (only.empty() || only == "spec") ok = specchat::bench::bench_spec(rep, spec) && ok;
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
    out.close();
    if (!out) {
      std::fprintf(stderr, "specchat-gpu-bench: cannot write %s\n", json_path.c_str());
      return rc ? rc : 3;
    }
  }
  return rc;
}

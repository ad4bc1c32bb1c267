// specchat-gpu-bench sections. Each prints its part of the table and appends rows to the report;
// each returns false when a correctness check in it failed (the program then exits 1).
// All throw on a device failure (cuda::CudaError / BackendError), caught in main.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "app/gpu_bench/report.h"
#include "engine/backend.h"

namespace specchat::bench {

// (a) every CUDA op vs its CPU twin: max normalized error, tolerance, device µs per call.
bool bench_ops(Report& rep);

// (b) decode tokens/s, achieved GB/s vs the device bandwidth, and tree-verify time for 1, 8,
// 16, 32, 64 nodes relative to a 1-token decode: the bundled pair (from `models_dir`) and a
// random 7B-shaped F16 model made on the device (skipped when `with_7b` is false).
bool bench_models(Report& rep, const std::string& models_dir, bool with_7b);

// (c) bundled pair: GPU vs CPU logits, greedy speculative (chain k=4 and a dynamic tree) ==
// baseline on the GPU, draft on GPU vs draft on CPU.
bool bench_pair(Report& rep, const std::string& models_dir);

// What section (d) runs.
struct SpecRun {
  std::string models_dir;    // specchat-{target,draft,dflash,mtp}.gguf
  std::string prompts_path;  // pre-encoded prompts (resources/bench/heldout-prompt-ids.txt)
  BackendKind backend = BackendKind::cuda;  // the target's (cpu: the same table without a device)
  int max_prompts = 12;      // the first N prompts of the file
  int n = 64;                // tokens generated per prompt and configuration
};

// (d) issue 13's table on the GPU: τ, α, decode tokens/s and speedup over plain decoding of the
// draft model (chains and dynamic trees, the draft on the host CPU, and one chain with the
// draft on the device), the DFlash block drafter (chains and trees, B = 8 and 16) and the MTP
// head (k = 1..4, a tree), greedy, every configuration from a cold cache on every prompt, as
// `specchat-cli bench` runs them. Returns false when any output differs from plain decoding.
// Throws std::runtime_error for an unreadable prompts file, DrafterBindError / GgufError for
// drafter files that do not bind to the target.
bool bench_spec(Report& rep, const SpecRun& run);

// The prompts file: lines "text|chat id id ..." (ids whole numbers in [0, 2^31); '#' lines and
// empty lines are skipped), the first `max_prompts`. Throws std::runtime_error naming the file
// and line for anything else, or when it holds none. Prompts too long for the context are left
// out by bench_spec (counted in its table; none left is an error).
std::vector<std::vector<int32_t>> load_prompt_ids(const std::string& path, int max_prompts);

}  // namespace specchat::bench

// specchat-gpu-bench sections. Each prints its part of the table and appends rows to the report;
// each returns false when a correctness check in it failed (the program then exits 1).
// All throw on a device failure (cuda::CudaError / BackendError), caught in main.
#pragma once

#include <string>

#include "app/gpu_bench/report.h"

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

}  // namespace specchat::bench

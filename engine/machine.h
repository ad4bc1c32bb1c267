// Facts about the machine the engine runs on, for measurements that only hold there (the
// calibration's timing tables, bench reports).
#pragma once

#include <string>

namespace specchat {

// "model name" of /proc/cpuinfo (the first one), or "unknown" where there is none.
std::string cpu_model_name();
// Logical cores (std::thread::hardware_concurrency), at least 1.
int cpu_cores();
// The CPU as timings name it: "AMD EPYC, 2 logical cores". A timing table records it, and one
// recorded on another machine is not used here (engine/speculative/calibration_store.h).
std::string cpu_machine_name();

}  // namespace specchat

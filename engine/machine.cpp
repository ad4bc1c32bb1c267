#include "engine/machine.h"

#include <algorithm>
#include <fstream>
#include <thread>

namespace specchat {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      const size_t v = c == std::string::npos ? std::string::npos : line.find_first_not_of(' ', c + 1);
      if (v != std::string::npos) return line.substr(v);
    }
  }
  return "unknown";
}

int cpu_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::string cpu_machine_name() {
  const int n = cpu_cores();
  return cpu_model_name() + ", " + std::to_string(n) + (n == 1 ? " logical core" : " logical cores");
}

}  // namespace specchat

#include "engine/panel_arena.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "kernels/cpu/linear_panels.h"

namespace specchat {

namespace {

// MemAvailable of /proc/meminfo in bytes, 0 when unknown.
size_t memory_available() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) == 0) return std::strtoull(line.c_str() + 13, nullptr, 10) * 1024;
  }
  return 0;
}

}  // namespace

bool panel_packing_enabled() {
  const char* e = std::getenv("SPECCHAT_CPU_PACK");
  return !(e && std::string(e) == "0");
}

PanelArena pack_in_panels(std::span<WeightView* const> views_in, cpu::ThreadPool* pool,
                          const std::function<void(const WeightView&)>& release) {
  // In the order given (the arena's layout follows the forward), each view once.
  std::vector<WeightView*> views;
  for (WeightView* v : views_in) {
    if (!v || v->panels || (v->type != DType::f16 && v->type != DType::bf16)) continue;
    if (std::find(views.begin(), views.end(), v) == views.end()) views.push_back(v);
  }
  if (views.empty() || !panel_packing_enabled()) return {};
  constexpr size_t kAlign = 64, kHuge = size_t{2} << 20;
  auto padded = [](const WeightView* v) { return (cpu::panel_bytes(v->n_out, v->n_in) + kAlign - 1) / kAlign * kAlign; };
  size_t total = 0;
  for (const WeightView* v : views) total += padded(v);
  // The panels are private memory on top of the page cache the mapping shares: a model near the
  // memory size keeps its matrices in the mapping (row-major kernels) instead of failing.
  const size_t avail = memory_available();
  if (avail > 0 && total > avail / 4 * 3) return {};
  // Over-allocated by one huge page so the arena can start on a 2 MiB boundary.
  const size_t len = (total + kHuge - 1) / kHuge * kHuge + kHuge;
  void* map = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return {};  // e.g. an address-space limit: the mapping still serves
  PanelArena arena;
  arena.bytes = total;
  arena.memory = std::shared_ptr<void>(map, [len](void* p) { munmap(p, len); });
  const uintptr_t base = (reinterpret_cast<uintptr_t>(map) + kHuge - 1) / kHuge * kHuge;
  madvise(reinterpret_cast<void*>(base), len - (base - reinterpret_cast<uintptr_t>(map)), MADV_HUGEPAGE);
  auto* out = reinterpret_cast<uint8_t*>(base);
  for (WeightView* v : views) {
    cpu::pack_panels(v->data, v->type, v->n_out, v->n_in, out, pool);
    if (release) release(*v);
    v->data = out;
    v->panels = true;
    out += padded(v);
  }
  return arena;
}

}  // namespace specchat

// Panel packing of a model's F16/BF16 matrices at load, shared by the target's CpuBackend and the
// CPU drafters (DFlash block drafter, MTP head): one arena per model, so every product of a
// forward runs on the outer-product panel kernels (kernels/cpu/linear_panels.h) instead of the
// row-major ones.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>

#include "engine/cpu_backend.h"
#include "kernels/cpu/thread_pool.h"

namespace specchat {

// The packed matrices of one model: `memory` keeps them alive (null when nothing was packed).
struct PanelArena {
  std::shared_ptr<void> memory;
  size_t bytes = 0;  // panel bytes (each matrix rounded up to 64 bytes)
};

// A matrix that lives in another model's arena, with what keeps that arena alive.
struct SharedWeight {
  WeightView view;                   // view.panels: packed by pack_in_panels
  std::shared_ptr<const void> keep;  // null: no matrix
};

// False when SPECCHAT_CPU_PACK=0 is in the environment (every matrix then stays row-major in
// its mapping; cpu_backend.h).
bool panel_packing_enabled();

// Repacks every view of `views` that is F16 or BF16 and not yet packed into panels of 16 output
// rows (cpu::pack_panels: the same values) in one anonymous mapping with huge pages asked for,
// and repoints it there (data, panels = true). `release`, when given, is called with each view
// before it is repointed (e.g. to give the file's pages of that tensor back). Nothing is packed,
// and an empty arena is returned, when packing is off, no view qualifies, the panels would not
// fit in 3/4 of MemAvailable, or the mapping fails: the views then stay as they were (the
// row-major kernels read them). A view listed twice is packed once.
PanelArena pack_in_panels(std::span<WeightView* const> views, cpu::ThreadPool* pool,
                          const std::function<void(const WeightView&)>& release = {});

}  // namespace specchat

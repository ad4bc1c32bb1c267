// From the user's GenerationSettings to the engine's SpecConfig: which drafter, which tree
// shape, which budget. Optimal (Sequoia) trees are planned from the draft's calibration file
// (engine/speculative/calibration_file.h), as `specchat-cli --tree optimal` does.
#pragma once

#include <QString>
#include <QStringList>

#include "engine/generator.h"
#include "engine/model_pair.h"
#include "ui/engine_types.h"

namespace specchat::ui {

struct SpecSetup {
  SpecConfig spec;           // what the request runs with (draft_k 0 = baseline)
  bool speculative = false;  // a drafter is used
  QString drafter;           // "draft model", "n-gram" or "none"
  QString tree_mode;         // tree_mode_name() of the effective budget, "none" for baseline
  int node_budget = 0;       // effective nodes per step (chains: draft_k)
  int depth = 0;             // effective depth per step (chains: draft_k)
  QStringList warnings;      // settings that could not be honoured, and what was used instead
};

// Plans the speculative side of a request on `pair`. Never throws for user settings:
// the model drafter without a draft model runs baseline; an optimal tree without a usable
// calibration (missing, for other model files, unreadable) or with the n-gram drafter falls
// back to a dynamic tree with the same budget; each fallback adds a warning. Budgets are
// clamped to what one target forward takes (max_batch − 1 nodes) and depth to [1, N].
SpecSetup plan_spec(const GenerationSettings& s, const ModelPair& pair);

}  // namespace specchat::ui

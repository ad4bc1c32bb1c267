// The app's adapter to RequestPlanner::plan_tree (engine/runtime/request_planner.h): the user's
// GenerationSettings become a SpecSettings, the planner decides drafter, tree shape, budget and
// fallbacks for the loaded pair (the same rules as `specchat-cli`), and the result is put in the
// words the live panel and the compare view show.
#pragma once

#include <span>

#include <QString>
#include <QStringList>

#include "engine/drafters/install.h"
#include "engine/generator.h"
#include "engine/model_pair.h"
#include "ui/engine_types.h"

namespace specchat::ui {

struct SpecSetup {
  SpecConfig spec;           // what the request runs with (draft_k 0 = baseline)
  bool speculative = false;  // a drafter is used
  QString drafter;           // "draft model", "n-gram" or "none"
  QString tree_mode;         // tree_mode_name() of the effective budget, "none" for baseline
  int node_budget = 0;       // effective nodes per step (chains: draft_k); 0 for baseline
  int depth = 0;             // effective depth per step (chains: draft_k); 0 for baseline
  QStringList warnings;      // settings that could not be honoured, and what was used instead
};

// Plans the speculative side of a request on `pair` with RequestPlanner::plan_tree (see there for
// the rules: baseline without a draft model, budgets clamped to one target forward, optimal trees
// from the calibration or the prior acceptance vector, n-gram trees dynamic). Auto trees time the
// models once on `prompt` (the request's ids; BOS repeated when empty) when neither the
// calibration nor the timing cache has a table for this setup; that timing failing is the one
// case that throws (std::runtime_error). `fd`: the block drafter and MTP head the engine has (a
// request for one it lacks plans plain decoding, with a warning).
SpecSetup plan_spec(const GenerationSettings& s, const ModelPair& pair, const FeatureDrafters& fd = {},
                    std::span<const int32_t> prompt = {});

}  // namespace specchat::ui

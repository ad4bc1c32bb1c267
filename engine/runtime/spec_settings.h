// SpecSettings: the speculative side of a request as a person or a script chooses it, with the
// one set of defaults every front end uses (the CLI's flags, the app's QSettings and dialog,
// the benchmarks). The front ends map their own flags/keys into it; RequestPlanner::plan_tree
// (engine/runtime/request_planner.h) turns it into the engine's SpecConfig for a loaded pair.
#pragma once

#include <string>
#include <string_view>

#include "engine/generator.h"
#include "engine/speculative/sequoia.h"

namespace specchat {

// Who drafts: nobody (plain decoding), the draft model, n-gram prompt lookup, or a drafter that
// reads the target's hidden states: the DFlash block drafter or an MTP head
// (docs/design/target-feature-drafters.md; they run where the front end installed them in the
// Engine, Engine::set_drafter_factory).
enum class DrafterChoice { none, model, ngram, block, mtp };
// "none", "model", "ngram", "block", "mtp".
const char* drafter_choice_name(DrafterChoice d);
// Parses drafter_choice_name()'s names; false (and *out untouched) for anything else.
bool parse_drafter_choice(std::string_view name, DrafterChoice* out);
// Parses tree_mode_name()'s names ("chain", "dynamic", "optimal"); false for anything else.
bool parse_tree_mode(std::string_view name, TreeMode* out);

// The largest values any front end accepts (CLI options, the API, calibration files): a node
// budget past one verification batch, or a tree as wide or deep as these, is never faster.
inline constexpr int kMaxNodeBudget = 127;  // tree nodes (and draft_k) per step
inline constexpr int kMaxDepth = 64;        // tree depth
inline constexpr int kMaxBranch = 32;       // children expanded per node (dynamic trees)

// Defaults (the CLI's, which every front end now shares; the app used depth 4, branch 2):
//   drafter model, tree chain, draft_k 4: a short chain is the safe start on any pair;
//   node_budget 16, depth 5, branch 3: used only when a tree is chosen; 16 nodes stay far below
//   max_batch (one verification forward), and depth 5 with a few children per node is the
//   order EAGLE-2 uses for its dynamic trees (Li et al. 2024). A deeper default lets a
//   well-aligned draft emit longer blocks; the budget, not the depth, bounds the cost.
struct SpecSettings {
  DrafterChoice drafter = DrafterChoice::model;
  TreeMode tree = TreeMode::chain;  // chain (draft_k tokens), dynamic (EAGLE-2), optimal (Sequoia)
  // `--tree auto` (CLI only): the node budget, depth and chain/optimal shape are chosen from the
  // calibration's acceptance vector and measured forward timings (RequestPlanner::plan_tree;
  // Sequoia §3.3); `tree`, node_budget and depth are then ignored.
  bool auto_tree = false;
  int draft_k = 4;       // chain length (tokens drafted per step); 0 = plain decoding, as drafter none
  int node_budget = 16;  // N: tree nodes sent to the target per step (dynamic, optimal)
  int depth = 5;         // D: longest root-to-leaf path (dynamic, optimal)
  int branch = 3;        // K: children expanded per node (dynamic)
  bool backoff = true;   // SpecConfig::backoff: pause drafting while drafts keep failing

  // A drafter is asked for (drafter not none and draft_k > 0). Whether one can run depends on
  // the loaded pair (plan_tree).
  bool drafts() const { return drafter != DrafterChoice::none && draft_k > 0; }
};

// The engine configuration these settings describe, as they are (no clamping, no calibration:
// RequestPlanner::plan_tree clamps to the loaded pair and supplies the shape). Not drafting
// (drafts() false) gives draft_k 0. Chain: draft_k tokens. Dynamic: node_budget / depth /
// branch. Optimal: the static tree `shape` (parents first, TreeShape from SequoiaPlanner); an
// empty shape drafts nothing. auto_tree must have been resolved by plan_tree (a chain or an
// optimal tree with its shape); here it is ignored. Never throws.
SpecConfig to_spec_config(const SpecSettings& s, const TreeShape& shape = {});

}  // namespace specchat

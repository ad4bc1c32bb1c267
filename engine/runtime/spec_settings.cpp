#include "engine/runtime/spec_settings.h"

namespace specchat {

const char* drafter_choice_name(DrafterChoice d) {
  switch (d) {
    case DrafterChoice::none: return "none";
    case DrafterChoice::model: return "model";
    case DrafterChoice::ngram: return "ngram";
    case DrafterChoice::block: return "block";
    case DrafterChoice::mtp: return "mtp";
  }
  return "none";
}

bool parse_drafter_choice(std::string_view name, DrafterChoice* out) {
  for (DrafterChoice d :
       {DrafterChoice::none, DrafterChoice::model, DrafterChoice::ngram, DrafterChoice::block, DrafterChoice::mtp}) {
    if (name == drafter_choice_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

bool parse_tree_mode(std::string_view name, TreeMode* out) {
  for (TreeMode m : {TreeMode::chain, TreeMode::dynamic, TreeMode::optimal}) {
    if (name == tree_mode_name(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

SpecConfig to_spec_config(const SpecSettings& s, const TreeShape& shape) {
  SpecConfig c;
  switch (s.drafter) {
    case DrafterChoice::ngram: c.drafter = DrafterKind::ngram; break;
    case DrafterChoice::block: c.drafter = DrafterKind::block; break;
    case DrafterChoice::mtp: c.drafter = DrafterKind::mtp; break;
    case DrafterChoice::none:
    case DrafterChoice::model: c.drafter = DrafterKind::model; break;
  }
  c.draft_k = s.drafts() ? s.draft_k : 0;
  c.tree.mode = s.tree;
  c.tree.node_budget = s.node_budget;
  c.tree.depth = s.depth;
  c.tree.branch = s.branch;
  c.backoff = s.backoff;
  if (s.tree == TreeMode::optimal) {
    c.tree.shape_parent = shape.parent;
    c.tree.shape_rank = shape.rank;
  }
  return c;
}

}  // namespace specchat

#include "ui/spec_setup.h"

#include "engine/runtime/request_planner.h"

namespace specchat::ui {

SpecSetup plan_spec(const GenerationSettings& s, const ModelPair& pair, const FeatureDrafters& fd,
                    std::span<const int32_t> prompt) {
  RequestPlanner planner(pair);
  planner.set_feature_drafters(fd);
  const TreePlan plan = planner.plan_tree(to_spec_settings(s), prompt);
  SpecSetup out;
  out.spec = plan.spec;
  out.speculative = plan.speculative();
  for (const std::string& w : plan.warnings) out.warnings << QString::fromStdString(w);
  if (!out.speculative) {
    out.drafter = QStringLiteral("none");
    out.tree_mode = QStringLiteral("none");
    return out;
  }
  switch (plan.settings.drafter) {
    case DrafterChoice::ngram: out.drafter = QStringLiteral("n-gram"); break;
    case DrafterChoice::block: out.drafter = QStringLiteral("block drafter"); break;
    case DrafterChoice::mtp: out.drafter = QStringLiteral("MTP head"); break;
    default: out.drafter = QStringLiteral("draft model"); break;
  }
  const TreeBudget eff = plan.spec.effective_budget();
  out.tree_mode = QString::fromUtf8(tree_mode_name(eff.mode));
  out.node_budget = eff.node_budget;
  out.depth = eff.depth;
  return out;
}

}  // namespace specchat::ui

#include "app/cli/feature_drafters.h"

#include <stdexcept>
#include <string>

#include "engine/runtime/engine.h"

namespace specchat::cli {

FeatureDrafters install_feature_drafters(Engine& /*engine*/, const CommonOptions& o) {
  const bool drafting = o.draft_k > 0 && (o.drafter == "block" || o.drafter == "mtp");
  if (!drafting && o.block_drafter.empty() && o.mtp.empty()) return {};
  const std::string what = drafting ? "--drafter " + o.drafter : !o.block_drafter.empty() ? "--block-drafter" : "--mtp";
  throw std::runtime_error(what +
                           ": drafters that read the target's hidden states (block, mtp) are not built into this "
                           "specchat-cli yet");
}

}  // namespace specchat::cli

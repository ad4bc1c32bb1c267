// The CLI's drafters that read the target's hidden states (docs/design/target-feature-drafters.md):
// the DFlash block drafter (--drafter block, --block-drafter FILE) and the MTP head (--drafter
// mtp, --mtp FILE), installed through engine/drafters/install.h.
#pragma once

#include "app/cli/options.h"
#include "engine/drafters/install.h"

namespace specchat::cli {

using specchat::FeatureDrafters;

// Installs the drafter --drafter asks for (with --draft-k > 0) and any --block-drafter / --mtp
// file. Without a file option the drafter is looked for beside the target
// (find_feature_drafter); none there is an error naming the flag to pass. Throws as
// specchat::install_feature_drafters.
FeatureDrafters install_feature_drafters(Engine& engine, const CommonOptions& o);

}  // namespace specchat::cli

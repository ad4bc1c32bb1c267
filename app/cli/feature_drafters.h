// The CLI's drafters that read the target's hidden states (docs/design/target-feature-drafters.md):
// the DFlash block drafter (--drafter block, --block-drafter FILE) and the MTP head (--drafter
// mtp, --mtp FILE). Engine::set_drafter_factory runs them; this file is the one place the CLI
// loads their files and installs them.
#pragma once

#include "app/cli/options.h"

namespace specchat {
class Engine;
}

namespace specchat::cli {

// What install_feature_drafters installed, for RequestPlanner::set_feature_drafters.
struct FeatureDrafters {
  int block_size = 0;  // the block drafter's B (anchor + B − 1 drafted tokens); 0 = none installed
  bool mtp = false;    // an MTP head is installed
};

// Loads the files of --block-drafter / --mtp and installs one drafter per KV slot of `engine`
// (Engine::set_drafter_factory) for the drafter the options ask for. Nothing happens (and
// nothing is returned installed) when neither block/mtp drafting (--drafter block|mtp with
// --draft-k > 0) nor a --block-drafter / --mtp file is asked for.
// Not built yet: asking for them throws std::runtime_error saying so (the concrete drafters,
// engine/speculative/block_drafter.h and mtp_drafter.h, are wired in here).
FeatureDrafters install_feature_drafters(Engine& engine, const CommonOptions& o);

}  // namespace specchat::cli

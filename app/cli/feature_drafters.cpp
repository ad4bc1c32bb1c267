#include "app/cli/feature_drafters.h"

namespace specchat::cli {

FeatureDrafters install_feature_drafters(Engine& engine, const CommonOptions& o) {
  FeatureDrafterRequest req;
  req.mtp = (o.draft_k > 0 && o.drafter == "mtp") || !o.mtp.empty();
  req.block = (o.draft_k > 0 && o.drafter == "block") || !o.block_drafter.empty();
  req.mtp_path = o.mtp;
  req.block_path = o.block_drafter;
  req.n_threads = o.threads;
  return specchat::install_feature_drafters(engine, req);
}

}  // namespace specchat::cli

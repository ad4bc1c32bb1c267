// Making drafters: the one place that turns a DrafterKind (SpecSettings::drafter, resolved by
// RequestPlanner) and a KV sequence into a Drafter over the models a loaded pair offers. The
// Engine makes its slots' drafters here (the draft model's and n-gram's at construction, the
// feature drafters' through install_feature_drafters, engine/drafters/install.h), so the CLI,
// the app and the server get the same drafter for the same settings.
#pragma once

#include <memory>

#include "engine/generator.h"
#include "engine/speculative/drafter.h"

namespace specchat {

class DFlashModel;
class LlamaModel;
class MtpModel;

// The models drafters draw on; what is null is not offered.
struct DrafterModels {
  const LlamaModel* target = nullptr;       // the target (vocabulary size, the MTP head's tap); required
  LlamaModel* draft = nullptr;              // the draft model (DrafterKind::model)
  std::shared_ptr<const DFlashModel> block;  // a DFlash block drafter bound to target (DrafterKind::block)
  std::shared_ptr<const MtpModel> mtp;       // an MTP head bound to target (DrafterKind::mtp)
  // Whether make_drafter can make `kind`: n-gram always, the others when their model is given.
  bool offers(DrafterKind kind) const;
};

// The drafter of `kind` for KV sequence `seq` (a drafter serves one sequence at a time and may
// keep its state: a draft model's cache rows in sequence `seq` of its pool, a feature drafter's
// context rows); null when `models` does not offer `kind`. n-gram lookup matches suffixes of 3
// down to 1 tokens. std::invalid_argument when models.target is null, or (ModelDrafter) seq is
// outside the draft's pool.
std::unique_ptr<Drafter> make_drafter(DrafterKind kind, int seq, const DrafterModels& models);

}  // namespace specchat

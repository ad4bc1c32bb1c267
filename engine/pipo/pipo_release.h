// Loading a PIPO release unit (docs/design/pipo.md, "The release unit"): the manifest pipo.json
// and its three parts (backbone.gguf, mtp.gguf, io.gguf), checked to be ONE release, bound to
// each other, and never silently replaced by plain decoding.
#pragma once

#include <memory>
#include <string>

#include "engine/model.h"
#include "engine/pipo/pipo_error.h"
#include "engine/pipo/pipo_session.h"

namespace specchat {

struct PipoLoadOptions {
  // How to load the backbone (context, sequences, batch, threads, backend). pipo_backbone is set
  // by the loader.
  LlamaModel::Options backbone;
  // A plain target the caller also runs (compare, fidelity gauge): when not empty, its sha256
  // must be the release's target.sha256 (PipoError target_mismatch otherwise).
  std::string plain_target;
  // With an empty plain_target: check the target file the manifest names (target.file) instead
  // (missing_part when it does not exist).
  bool check_release_target = false;
};

// `path`: a release folder (holding pipo.json) or the manifest file itself. Part files are
// resolved relative to the manifest's folder. Checks, in this order, and throws PipoError with
// the kind and a message naming the part, file and both values:
//   manifest       unreadable / not JSON / format != "specchat-pipo" / version != 1 / a field missing
//   bad_setting    pair_size != 2, extra_draft_tokens != 1, recommended_threshold outside [0, 1]
//   missing_part   a part file absent or unreadable (GgufError's text included)
//   part_sha256    a part file's sha256 != the manifest's
//   wrong_role     a part's pipo.role != its slot
//   mixed_release  a part's pipo.release or pipo.target.sha256 != the manifest's
//   unbound_head   the MTP head refused by MtpModel::load against this backbone (its reason)
//   wrong_shape    io width / tensors (PipoIo::load)
//   target_mismatch  opt.plain_target's sha256 != target.sha256
// The backbone is loaded with LlamaModel::Options::pipo_backbone (ModelError otherwise as usual).
PipoUnit load_pipo_release(const std::string& path, const PipoLoadOptions& opt);

}  // namespace specchat

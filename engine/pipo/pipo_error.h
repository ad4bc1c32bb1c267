// Why a PIPO release unit (docs/design/pipo.md) cannot be loaded. The loader never falls back to
// plain decoding: every refusal names the part and the reason, with a stable kind for --json.
#pragma once

#include <string>

#include "engine/backend.h"

namespace specchat {

enum class PipoErrorKind {
  manifest,         // pipo.json missing, unreadable, malformed, or another format / version
  bad_setting,      // pair_size != 2, extra_draft_tokens != 1, a threshold outside [0, 1], …
  missing_part,     // a part's file is absent or unreadable
  part_sha256,      // a part's sha256 differs from the manifest's
  mixed_release,    // a part's pipo.release or pipo.target.sha256 differs from the manifest's
  wrong_role,       // a part's pipo.role is not its slot (e.g. an MTP head in the io slot)
  unbound_head,     // the MTP head is not bound to this backbone (specchat.target.sha256, width, vocabulary)
  wrong_shape,      // an io tensor or key disagrees with the backbone (width) or with itself
  target_mismatch,  // the plain target given for compare / fidelity is not the one the release names
};

inline const char* pipo_error_kind_name(PipoErrorKind k) {
  switch (k) {
    case PipoErrorKind::manifest: return "manifest";
    case PipoErrorKind::bad_setting: return "bad_setting";
    case PipoErrorKind::missing_part: return "missing_part";
    case PipoErrorKind::part_sha256: return "part_sha256";
    case PipoErrorKind::mixed_release: return "mixed_release";
    case PipoErrorKind::wrong_role: return "wrong_role";
    case PipoErrorKind::unbound_head: return "unbound_head";
    case PipoErrorKind::wrong_shape: return "wrong_shape";
    case PipoErrorKind::target_mismatch: return "target_mismatch";
  }
  return "unknown";
}

// A ModelError, so front ends that report model-load failures report this one too.
class PipoError : public ModelError {
 public:
  PipoError(PipoErrorKind kind, const std::string& what) : ModelError("PIPO release refused: " + what), kind_(kind) {}
  PipoErrorKind kind() const { return kind_; }

 private:
  PipoErrorKind kind_;
};

}  // namespace specchat

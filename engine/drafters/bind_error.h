// Why a drafter file that reads the target's weights or hidden states (DFlash block drafter, MTP
// head: docs/design/target-feature-drafters.md) cannot be bound to a loaded target model.
// Shared by engine/drafters/*: one error type, one set of stable kind names for --json errors.
#pragma once

#include <string>

#include "engine/backend.h"

namespace specchat {

enum class DrafterBindErrorKind {
  wrong_architecture,  // general.architecture is not the drafter's
  unsupported,         // a key, tensor or value the engine does not run (named), e.g. a bias
  missing_tensor,      // a required tensor (named) is absent
  wrong_width,         // a width (embedding_length, a tensor's shape, a tap) disagrees with the target
  vocab_mismatch,      // vocabulary size / LM head shape differs from the target's
  target_mismatch,     // specchat.target.architecture names another architecture
  sha256_mismatch,     // specchat.target.sha256 differs from the target file's, or it cannot be hashed
  target_unreadable,   // the target has no GGUF file to read its embedding / LM head from
  missing_key,         // a required hyper-parameter key (named) is absent
  bad_value,           // a key holds a value no consistent model has (a zero size, block_size < 2, …)
  wrong_shape,         // a drafter tensor's shape differs from what its own keys imply (both shapes named)
  bad_tap,             // a target layer the drafter reads is outside the target's layers
};

// Stable name of a kind ("missing_tensor", ...).
inline const char* drafter_bind_error_kind_name(DrafterBindErrorKind k) {
  switch (k) {
    case DrafterBindErrorKind::wrong_architecture: return "wrong_architecture";
    case DrafterBindErrorKind::unsupported: return "unsupported";
    case DrafterBindErrorKind::missing_tensor: return "missing_tensor";
    case DrafterBindErrorKind::wrong_width: return "wrong_width";
    case DrafterBindErrorKind::vocab_mismatch: return "vocab_mismatch";
    case DrafterBindErrorKind::target_mismatch: return "target_mismatch";
    case DrafterBindErrorKind::sha256_mismatch: return "sha256_mismatch";
    case DrafterBindErrorKind::target_unreadable: return "target_unreadable";
    case DrafterBindErrorKind::missing_key: return "missing_key";
    case DrafterBindErrorKind::bad_value: return "bad_value";
    case DrafterBindErrorKind::wrong_shape: return "wrong_shape";
    case DrafterBindErrorKind::bad_tap: return "bad_tap";
  }
  return "unknown";
}

// A drafter file refused against a target. A ModelError, so callers that already report model
// errors report it too; what() names the drafter file and the offending key/tensor/value.
class DrafterBindError : public ModelError {
 public:
  DrafterBindError(DrafterBindErrorKind kind, const std::string& message) : ModelError(message), kind_(kind) {}
  DrafterBindErrorKind kind() const { return kind_; }

 private:
  DrafterBindErrorKind kind_;
};

}  // namespace specchat

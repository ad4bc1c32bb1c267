// The outcome of a GGUF call in tests: "ok", or the GgufError's kind name and message (any
// other exception escapes and fails the test).
#pragma once

#include <string>

#include "engine/gguf.h"

namespace specchat::test {

struct GgufOutcome {
  std::string kind;     // "ok" or gguf_error_kind_name
  std::string message;  // what(); "" when ok
};

template <class F>
GgufOutcome gguf_outcome_of(F&& f) {
  try {
    f();
    return {"ok", ""};
  } catch (const GgufError& e) {
    return {gguf_error_kind_name(e.kind()), e.what()};
  }
}

}  // namespace specchat::test

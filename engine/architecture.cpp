#include "engine/architecture.h"

namespace specchat {

namespace {
const Architecture* const kAll[] = {&kArchLlama, &kArchQwen2, &kArchQwen3};
}

const Architecture* find_architecture(const std::string& name) {
  for (const Architecture* a : kAll) {
    if (name == a->name) return a;
  }
  return nullptr;
}

std::string supported_architecture_names() {
  std::string s;
  for (const Architecture* a : kAll) s += (s.empty() ? "" : ", ") + std::string(a->name);
  return s;
}

}  // namespace specchat

// Internal to the GGUF reader (gguf.cpp, gguf_metadata.cpp): value-type names and checks
// shared by the parser and the typed metadata accessors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf.h"

namespace specchat::gguf_detail {

inline bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::f64); }

inline bool is_int_type(GgufType t) {
  const auto u = static_cast<uint32_t>(t);  // u8..i32 are 0..5, u64 and i64 are 10 and 11
  return u <= 5 || u == 10 || u == 11;
}

// "u8", "string", ... ("unknown" outside GgufType).
inline const char* value_type_name(GgufType t) {
  // Indexed by GgufType (0..12).
  static constexpr const char* kNames[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
  return known_value_type(static_cast<uint32_t>(t)) ? kNames[static_cast<uint32_t>(t)] : "unknown";
}

// "[a, b, c]" of a tensor shape, for error messages.
inline std::string dims_string(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace specchat::gguf_detail

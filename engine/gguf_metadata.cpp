// Typed access to a GGUF file's metadata (GgufFile::get_*): each accessor checks the key's
// presence and value type and says what it found instead of converting silently (B19).
#include <cmath>
#include <limits>
#include <utility>

#include "engine/gguf.h"
#include "engine/gguf_values.h"

namespace specchat {

using namespace gguf_detail;

namespace {

std::string value_summary(const GgufValue& v) {
  const std::string type = value_type_name(v.type);
  if (auto u = std::get_if<uint64_t>(&v.v)) return type + " " + std::to_string(*u);
  if (auto s = std::get_if<int64_t>(&v.v)) return type + " " + std::to_string(*s);
  if (auto d = std::get_if<double>(&v.v)) return type + " " + std::to_string(*d);
  if (v.type == GgufType::array) return "array of " + std::string(value_type_name(v.array_type));
  return type;
}

// Integer value `v` as T when it is an integer type and fits.
template <class T>
bool int_as(const GgufValue& v, T* out) {
  if (!is_int_type(v.type)) return false;
  if (auto u = std::get_if<uint64_t>(&v.v); u && std::in_range<T>(*u)) {
    *out = static_cast<T>(*u);
    return true;
  }
  if (auto s = std::get_if<int64_t>(&v.v); s && std::in_range<T>(*s)) {
    *out = static_cast<T>(*s);
    return true;
  }
  return false;
}

// Float value of a float or integer `v`; false for other types or a finite f64 beyond f32 range.
bool float_as(const GgufValue& v, float* out) {
  if (v.type == GgufType::f32 || v.type == GgufType::f64) {
    const double* d = std::get_if<double>(&v.v);
    if (!d) return false;
    if (std::isfinite(*d) && std::fabs(*d) > std::numeric_limits<float>::max()) return false;
    *out = static_cast<float>(*d);
    return true;
  }
  if (!is_int_type(v.type)) return false;
  if (auto u = std::get_if<uint64_t>(&v.v)) *out = static_cast<float>(*u);
  else if (auto s = std::get_if<int64_t>(&v.v)) *out = static_cast<float>(*s);
  else return false;
  return true;
}

const GgufValue& need_key(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v) {
    throw GgufError(GgufErrorKind::missing_key,
                    f.path() + ": metadata key '" + key + "' is missing");
  }
  return *v;
}

[[noreturn]] void wrong(const GgufFile& f, const std::string& key, const GgufValue& v,
                        const std::string& expected) {
  throw GgufError(GgufErrorKind::wrong_type, f.path() + ": metadata key '" + key + "' is " +
                                                 value_summary(v) + ", expected " + expected);
}

const std::vector<GgufValue>& need_array(const GgufFile& f, const std::string& key,
                                         const std::string& expected) {
  const GgufValue& v = need_key(f, key);
  const auto* a = std::get_if<std::vector<GgufValue>>(&v.v);
  if (v.type != GgufType::array || !a) wrong(f, key, v, expected);
  return *a;
}

[[noreturn]] void wrong_elem(const GgufFile& f, const std::string& key, size_t i,
                             const GgufValue& e, const std::string& expected) {
  throw GgufError(GgufErrorKind::wrong_type,
                  f.path() + ": element " + std::to_string(i) + " of metadata array '" + key +
                      "' is " + value_summary(e) + ", expected " + expected);
}

}  // namespace

uint32_t GgufFile::get_u32(const std::string& key) const {
  const GgufValue& v = need_key(*this, key);
  uint32_t out = 0;
  if (!int_as(v, &out)) wrong(*this, key, v, "an integer that fits u32");
  return out;
}

int64_t GgufFile::get_i64(const std::string& key) const {
  const GgufValue& v = need_key(*this, key);
  int64_t out = 0;
  if (!int_as(v, &out)) wrong(*this, key, v, "an integer that fits i64");
  return out;
}

float GgufFile::get_f32(const std::string& key) const {
  const GgufValue& v = need_key(*this, key);
  float out = 0;
  if (!float_as(v, &out)) wrong(*this, key, v, "a number that fits f32");
  return out;
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = need_key(*this, key);
  const bool* b = std::get_if<bool>(&v.v);
  if (v.type != GgufType::boolean || !b) wrong(*this, key, v, "bool");
  return *b;
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = need_key(*this, key);
  const std::string* s = std::get_if<std::string>(&v.v);
  if (v.type != GgufType::string || !s) wrong(*this, key, v, "string");
  return *s;
}

uint32_t GgufFile::get_u32_or(const std::string& key, uint32_t fallback) const {
  return has(key) ? get_u32(key) : fallback;
}
float GgufFile::get_f32_or(const std::string& key, float fallback) const {
  return has(key) ? get_f32(key) : fallback;
}
bool GgufFile::get_bool_or(const std::string& key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}
std::string GgufFile::get_string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const auto& a = need_array(*this, key, "array of string");
  if (find(key)->array_type != GgufType::string) wrong(*this, key, *find(key), "array of string");
  std::vector<std::string> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string* s = std::get_if<std::string>(&a[i].v);
    if (!s) wrong_elem(*this, key, i, a[i], "string");
    out.push_back(*s);
  }
  return out;
}

std::vector<float> GgufFile::get_f32_array(const std::string& key) const {
  const auto& a = need_array(*this, key, "array of numbers");
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!float_as(a[i], &out[i])) wrong_elem(*this, key, i, a[i], "a number that fits f32");
  }
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(const std::string& key) const {
  const auto& a = need_array(*this, key, "array of integers");
  std::vector<int32_t> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!int_as(a[i], &out[i])) wrong_elem(*this, key, i, a[i], "an integer that fits i32");
  }
  return out;
}

}  // namespace specchat

// Header-only GGUF v3 writer for tests: builds valid files of any metadata type and f32 / f16 /
// bf16 / q8_0 tensors, and can be told to write malformed ones (bad magic, other versions, wrong
// counts, misplaced offsets, unknown types, raw bytes) so tests can check every GgufError kind.
//
//   specchat::test::GgufBuilder b;
//   b.set_string("general.architecture", "llama").set_u32("llama.block_count", 2);
//   b.add_tensor_f32("output_norm.weight", {4}, {1, 2, 3, 4});
//   std::vector<uint8_t> bytes = b.build();           // or b.write_file(path)
//   auto b2 = GgufBuilder::from_file(GgufFile::open(path));  // mutate a real model, write back
//
// Layout written: header, metadata in insertion order, tensor infos in insertion order, zero
// padding to the alignment, then each tensor's data at the next aligned offset (no trailing pad,
// so the last tensor ends exactly at the end of the file).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "engine/gguf.h"

namespace specchat::test {

// IEEE binary16 from f32, round to nearest even (overflow -> inf, nan stays nan).
inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf, or a quiet nan
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {  // below 2^-14: half subnormal or zero; a * 2^24 is exact
    const float a = std::bit_cast<float>(ax);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t h = (((ax >> 23) - 112) << 10) | ((ax & 0x7fffffu) >> 13);
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

// bf16 from f32, round to nearest even.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // nan
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Metadata value constructors (GgufValue stores every integer widened to u64 / i64).
namespace gguf_value {
inline GgufValue uint(GgufType t, uint64_t v) { GgufValue g; g.type = t; g.v = v; return g; }
inline GgufValue sint(GgufType t, int64_t v) { GgufValue g; g.type = t; g.v = v; return g; }
inline GgufValue f32(float v) { GgufValue g; g.type = GgufType::f32; g.v = double{v}; return g; }
inline GgufValue f64(double v) { GgufValue g; g.type = GgufType::f64; g.v = v; return g; }
inline GgufValue boolean(bool v) { GgufValue g; g.type = GgufType::boolean; g.v = v; return g; }
inline GgufValue string(std::string v) {
  GgufValue g; g.type = GgufType::string; g.v = std::move(v); return g;
}
inline GgufValue array(GgufType elem, std::vector<GgufValue> v) {
  GgufValue g; g.type = GgufType::array; g.array_type = elem; g.v = std::move(v); return g;
}
}  // namespace gguf_value

// Deep equality of two metadata values (nan equals nan), for comparing rewritten files.
inline bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.v.index() != b.v.index()) return false;
  if (const auto* x = std::get_if<std::vector<GgufValue>>(&a.v)) {
    const auto& y = std::get<std::vector<GgufValue>>(b.v);
    if (a.array_type != b.array_type || x->size() != y.size()) return false;
    for (size_t i = 0; i < x->size(); ++i) {
      if (!same_value((*x)[i], y[i])) return false;
    }
    return true;
  }
  if (const auto* d = std::get_if<double>(&a.v)) {
    const double e = std::get<double>(b.v);
    return *d == e || (std::isnan(*d) && std::isnan(e));
  }
  if (const auto* u = std::get_if<uint64_t>(&a.v)) return *u == std::get<uint64_t>(b.v);
  if (const auto* i = std::get_if<int64_t>(&a.v)) return *i == std::get<int64_t>(b.v);
  if (const auto* t = std::get_if<bool>(&a.v)) return *t == std::get<bool>(b.v);
  return std::get<std::string>(a.v) == std::get<std::string>(b.v);
}

// Byte offsets of what build() wrote, so tests can cut or patch at exact places.
struct GgufLayout {
  uint64_t header_end = 0;                  // 24: after magic, version and both counts
  std::vector<uint64_t> kv_start;           // each metadata entry (its key length)
  std::vector<uint64_t> kv_value_start;     // each entry's value (after its u32 type)
  uint64_t tensor_info_start = 0;
  std::vector<uint64_t> tensor_info_start_of;  // each tensor info (its name length)
  uint64_t data_start = 0;                  // start of the tensor-data section (aligned)
  std::vector<uint64_t> tensor_data_start;  // absolute file offset of each tensor's data
  uint64_t size = 0;
};

class GgufBuilder {
 public:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;   // written as is: n_dims = ne.size(), so bad shapes are possible
    uint32_t type = 0;          // raw ggml type id
    std::vector<uint8_t> data;
    std::optional<uint64_t> offset;  // written instead of the computed offset when set
  };

  // ---- metadata (set_* replaces a key of the same name, keeping its position) ----
  GgufBuilder& set(const std::string& key, GgufValue v) {
    for (auto& kv : kv_) {
      if (!kv.raw && kv.key == key) { kv.value = std::move(v); return *this; }
    }
    return append(key, std::move(v));
  }
  using Key = const std::string&;
  GgufBuilder& set_u8(Key k, uint8_t v) { return set(k, gguf_value::uint(GgufType::u8, v)); }
  GgufBuilder& set_i8(Key k, int8_t v) { return set(k, gguf_value::sint(GgufType::i8, v)); }
  GgufBuilder& set_u16(Key k, uint16_t v) { return set(k, gguf_value::uint(GgufType::u16, v)); }
  GgufBuilder& set_i16(Key k, int16_t v) { return set(k, gguf_value::sint(GgufType::i16, v)); }
  GgufBuilder& set_u32(Key k, uint32_t v) { return set(k, gguf_value::uint(GgufType::u32, v)); }
  GgufBuilder& set_i32(Key k, int32_t v) { return set(k, gguf_value::sint(GgufType::i32, v)); }
  GgufBuilder& set_u64(Key k, uint64_t v) { return set(k, gguf_value::uint(GgufType::u64, v)); }
  GgufBuilder& set_i64(Key k, int64_t v) { return set(k, gguf_value::sint(GgufType::i64, v)); }
  GgufBuilder& set_f32(const std::string& k, float v) { return set(k, gguf_value::f32(v)); }
  GgufBuilder& set_f64(const std::string& k, double v) { return set(k, gguf_value::f64(v)); }
  GgufBuilder& set_bool(const std::string& k, bool v) { return set(k, gguf_value::boolean(v)); }
  GgufBuilder& set_string(const std::string& k, const std::string& v) {
    return set(k, gguf_value::string(v));
  }
  GgufBuilder& set_string_array(const std::string& k, const std::vector<std::string>& v) {
    std::vector<GgufValue> a;
    for (const auto& s : v) a.push_back(gguf_value::string(s));
    return set(k, gguf_value::array(GgufType::string, std::move(a)));
  }
  GgufBuilder& set_f32_array(const std::string& k, const std::vector<float>& v) {
    std::vector<GgufValue> a;
    for (float x : v) a.push_back(gguf_value::f32(x));
    return set(k, gguf_value::array(GgufType::f32, std::move(a)));
  }
  GgufBuilder& set_i32_array(const std::string& k, const std::vector<int32_t>& v) {
    std::vector<GgufValue> a;
    for (int32_t x : v) a.push_back(gguf_value::sint(GgufType::i32, x));
    return set(k, gguf_value::array(GgufType::i32, std::move(a)));
  }
  // Sets general.alignment (u32) and pads the file to `a`. Setting the key with set_u32 alone
  // changes only the key (for malformed files); the padding then stays as before.
  GgufBuilder& set_alignment(uint32_t a) {
    pad_alignment_ = a;
    return set_u32("general.alignment", a);
  }
  GgufBuilder& remove(const std::string& key) {
    std::erase_if(kv_, [&](const Kv& kv) { return kv.key == key; });
    return *this;
  }
  bool has(const std::string& key) const {
    return std::any_of(kv_.begin(), kv_.end(), [&](const Kv& kv) { return kv.key == key; });
  }

  // ---- tensors (data is given innermost dimension first, like ne) ----
  GgufBuilder& add_tensor_f32(const std::string& name, std::vector<uint64_t> ne,
                              const std::vector<float>& data) {
    std::vector<uint8_t> bytes(data.size() * 4);
    if (!data.empty()) std::memcpy(bytes.data(), data.data(), bytes.size());
    return add_tensor_raw(name, std::move(ne), type_id(GgmlType::f32), std::move(bytes));
  }
  GgufBuilder& add_tensor_f16(const std::string& name, std::vector<uint64_t> ne,
                              const std::vector<float>& data) {
    return add_tensor_raw(name, std::move(ne), type_id(GgmlType::f16),
                          halves(data, f32_to_f16));
  }
  GgufBuilder& add_tensor_bf16(const std::string& name, std::vector<uint64_t> ne,
                               const std::vector<float>& data) {
    return add_tensor_raw(name, std::move(ne), type_id(GgmlType::bf16),
                          halves(data, f32_to_bf16));
  }
  // q8_0 as ggml quantizes it: per 32 values d = amax / 127 (stored f16), q = round(x / d).
  // data.size() must be a multiple of 32.
  GgufBuilder& add_tensor_q8_0(const std::string& name, std::vector<uint64_t> ne,
                               const std::vector<float>& data) {
    if (data.size() % 32 != 0) throw std::invalid_argument("q8_0 needs a multiple of 32 values");
    std::vector<uint8_t> bytes;
    for (size_t b = 0; b < data.size(); b += 32) {
      float amax = 0;
      for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(data[b + j]));
      const float d = amax / 127.0f;
      const float id = d != 0 ? 1.0f / d : 0.0f;
      push_u16(bytes, f32_to_f16(d));
      for (size_t j = 0; j < 32; ++j) {
        bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::lround(data[b + j] * id))));
      }
    }
    return add_tensor_raw(name, std::move(ne), type_id(GgmlType::q8_0), std::move(bytes));
  }
  // Any type id, shape and bytes, unchecked (for unknown types, bad dims, short data).
  GgufBuilder& add_tensor_raw(const std::string& name, std::vector<uint64_t> ne, uint32_t type,
                              std::vector<uint8_t> data) {
    tensors_.push_back(Tensor{name, std::move(ne), type, std::move(data), std::nullopt});
    return *this;
  }
  GgufBuilder& remove_tensor(const std::string& name) {
    std::erase_if(tensors_, [&](const Tensor& t) { return t.name == name; });
    return *this;
  }
  // The tensor named `name` (first match), to edit its shape, type, data or offset directly.
  Tensor& tensor(const std::string& name) {
    for (auto& t : tensors_) {
      if (t.name == name) return t;
    }
    throw std::out_of_range("GgufBuilder: no tensor " + name);
  }
  const std::vector<Tensor>& tensors() const { return tensors_; }

  // ---- hooks for malformed files ----
  GgufBuilder& set_magic(const std::string& m) { magic_ = m; return *this; }  // written verbatim
  GgufBuilder& set_version(uint32_t v) { version_ = v; return *this; }
  GgufBuilder& override_tensor_count(uint64_t n) { tensor_count_ = n; return *this; }
  GgufBuilder& override_kv_count(uint64_t n) { kv_count_ = n; return *this; }
  GgufBuilder& set_tensor_offset(const std::string& name, uint64_t off) {
    tensor(name).offset = off;  // data is still placed at the computed offset
    return *this;
  }
  // Appends an entry without replacing one of the same key (duplicate keys).
  GgufBuilder& append(const std::string& key, GgufValue v) {
    kv_.push_back(Kv{key, std::move(v), false, 0, {}});
    return *this;
  }
  // Appends an entry whose value type id and value bytes are written verbatim.
  GgufBuilder& append_raw(const std::string& key, uint32_t type, std::vector<uint8_t> payload) {
    kv_.push_back(Kv{key, GgufValue{}, true, type, std::move(payload)});
    return *this;
  }

  // ---- output ----
  std::vector<uint8_t> build(GgufLayout* layout = nullptr) const {
    GgufLayout lay;
    std::vector<uint8_t> out(magic_.begin(), magic_.end());
    push_u32(out, version_);
    push_u64(out, tensor_count_.value_or(tensors_.size()));
    push_u64(out, kv_count_.value_or(kv_.size()));
    lay.header_end = out.size();
    for (const Kv& kv : kv_) {
      lay.kv_start.push_back(out.size());
      push_string(out, kv.key);
      push_u32(out, kv.raw ? kv.raw_type : static_cast<uint32_t>(kv.value.type));
      lay.kv_value_start.push_back(out.size());
      if (kv.raw) out.insert(out.end(), kv.payload.begin(), kv.payload.end());
      else push_value(out, kv.value);
    }
    lay.tensor_info_start = out.size();
    const uint64_t a = pad_alignment_ ? pad_alignment_ : 1;
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const Tensor& t : tensors_) {
      offsets.push_back(next);
      next = (next + t.data.size() + a - 1) / a * a;
      lay.tensor_info_start_of.push_back(out.size());
      push_string(out, t.name);
      push_u32(out, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) push_u64(out, d);
      push_u32(out, t.type);
      push_u64(out, t.offset.value_or(offsets.back()));
    }
    if (!tensors_.empty()) out.resize((out.size() + a - 1) / a * a, 0);
    lay.data_start = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      out.resize(lay.data_start + offsets[i], 0);
      lay.tensor_data_start.push_back(out.size());
      out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
    }
    lay.size = out.size();
    if (layout) *layout = std::move(lay);
    return out;
  }

  void write_file(const std::string& path) const { write_bytes(path, build()); }

  static void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("GgufBuilder: cannot write " + path);
  }

  // Copies all metadata (in key order: GgufFile keeps a map), the alignment and every tensor's
  // shape, type and bytes, so a real model can be mutated and written back.
  static GgufBuilder from_file(const GgufFile& f) {
    GgufBuilder b;
    b.version_ = f.version();
    b.pad_alignment_ = f.alignment();
    for (const auto& [k, v] : f.metadata()) b.append(k, v);
    for (const auto& t : f.tensors()) {
      b.add_tensor_raw(t.name, t.ne, dtype_ggml_id(t.type),
                       std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    }
    return b;
  }

  // `bytes` cut to its first `n` bytes.
  static std::vector<uint8_t> truncated(const std::vector<uint8_t>& bytes, size_t n) {
    const auto end = bytes.begin() + static_cast<std::ptrdiff_t>(std::min(n, bytes.size()));
    return std::vector<uint8_t>(bytes.begin(), end);
  }

  static void push_u16(std::vector<uint8_t>& o, uint16_t v) { push_le(o, v, 2); }
  static void push_u32(std::vector<uint8_t>& o, uint32_t v) { push_le(o, v, 4); }
  static void push_u64(std::vector<uint8_t>& o, uint64_t v) { push_le(o, v, 8); }
  static void push_string(std::vector<uint8_t>& o, const std::string& s) {
    push_u64(o, s.size());
    o.insert(o.end(), s.begin(), s.end());
  }

 private:
  struct Kv {
    std::string key;
    GgufValue value;
    bool raw = false;
    uint32_t raw_type = 0;
    std::vector<uint8_t> payload;
  };

  static uint32_t type_id(GgmlType t) { return dtype_ggml_id(t); }
  static void push_le(std::vector<uint8_t>& o, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) o.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  static uint64_t bits_of(const GgufValue& v) {
    if (auto u = std::get_if<uint64_t>(&v.v)) return *u;
    if (auto s = std::get_if<int64_t>(&v.v)) return static_cast<uint64_t>(*s);
    if (auto b = std::get_if<bool>(&v.v)) return *b ? 1 : 0;
    return 0;
  }
  static double real_of(const GgufValue& v) {
    if (auto d = std::get_if<double>(&v.v)) return *d;
    if (auto u = std::get_if<uint64_t>(&v.v)) return static_cast<double>(*u);
    if (auto s = std::get_if<int64_t>(&v.v)) return static_cast<double>(*s);
    return 0;
  }
  static void push_value(std::vector<uint8_t>& o, const GgufValue& v) {
    switch (v.type) {
      case GgufType::u8: case GgufType::i8: case GgufType::boolean:
        push_le(o, bits_of(v), 1);
        break;
      case GgufType::u16: case GgufType::i16: push_le(o, bits_of(v), 2); break;
      case GgufType::u32: case GgufType::i32: push_le(o, bits_of(v), 4); break;
      case GgufType::u64: case GgufType::i64: push_le(o, bits_of(v), 8); break;
      case GgufType::f32:
        push_u32(o, std::bit_cast<uint32_t>(static_cast<float>(real_of(v))));
        break;
      case GgufType::f64: push_u64(o, std::bit_cast<uint64_t>(real_of(v))); break;
      case GgufType::string: {
        const auto* s = std::get_if<std::string>(&v.v);
        push_string(o, s ? *s : std::string());
        break;
      }
      case GgufType::array: {
        push_u32(o, static_cast<uint32_t>(v.array_type));
        const auto* a = std::get_if<std::vector<GgufValue>>(&v.v);
        push_u64(o, a ? a->size() : 0);
        if (a) {
          for (const auto& e : *a) push_value(o, e);
        }
        break;
      }
    }
  }
  static std::vector<uint8_t> halves(const std::vector<float>& data, uint16_t (*conv)(float)) {
    std::vector<uint8_t> bytes;
    for (float x : data) push_u16(bytes, conv(x));
    return bytes;
  }

  std::string magic_ = "GGUF";
  uint32_t version_ = 3;
  uint32_t pad_alignment_ = 32;
  std::optional<uint64_t> tensor_count_;
  std::optional<uint64_t> kv_count_;
  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace specchat::test

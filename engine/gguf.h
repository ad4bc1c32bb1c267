// GGUF v3 reader: metadata, tensor infos and memory-mapped tensor data.
//
// Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (v3, little endian).
// The whole file is mmap'ed read-only; every length, count, offset and dimension is checked
// against the file size before it is used, so a malformed file gives a typed GgufError and
// never reads out of range (FAULT-KINDS B19).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "kernels/dtype.h"

namespace specchat {

// Why a GGUF file was refused. Stable names (see gguf_error_kind_name) go into --json errors.
enum class GgufErrorKind {
  io,                   // cannot open / stat / mmap the file
  bad_magic,            // first 4 bytes are not "GGUF"
  unsupported_version,  // version other than 2 or 3
  truncated,            // header, metadata or tensor-info table runs past end of file
  data_past_end,        // a tensor's data range lies (partly) past end of file
  absurd_value,         // a count, length, dimension or alignment no sane file has
  unknown_type,         // unknown metadata value type or tensor (ggml) type
  missing_key,          // a required metadata key or tensor is absent
  wrong_type,           // a metadata key or tensor has an unexpected type or shape
};

const char* gguf_error_kind_name(GgufErrorKind kind);

// Thrown by GgufFile and its accessors. what() names the file and the offending item.
class GgufError : public std::runtime_error {
 public:
  GgufError(GgufErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  GgufErrorKind kind() const { return kind_; }

 private:
  GgufErrorKind kind_;
};

// GGUF metadata value types (gguf.md, "gguf_metadata_value_type").
enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

// Tensor types are the engine's one weight-type vocabulary (kernels/dtype.h); the file's ggml
// type ids map to it with dtype_from_ggml. GgmlType is kept as a name for it in reader code.
using GgmlType = DType;

// ggml's name of a type ("f32", "q8_0", ...).
const char* ggml_type_name(GgmlType type);

// True when this reader loads tensors of type t: every type of the DType vocabulary (f32, f16,
// bf16, q8_0, q4_0, q4_K, q5_K, q6_K), each of which the CPU kernels read in place. ggml type
// ids outside the vocabulary (q4_1, q2_K, i-quants, ...) are refused with unknown_type, naming
// the id.
bool gguf_loads_type(DType t);

// One metadata value. Integers of every width are widened to int64/uint64 on read;
// arrays hold their element type and elements (nested arrays are allowed by the format).
struct GgufValue {
  GgufType type = GgufType::u32;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GgufValue>> v;
  GgufType array_type = GgufType::u32;  // element type when type == array
};

// A tensor as described in the tensor-info table.
struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;   // dims, innermost (contiguous) first, as ggml: ne[0] = row length
  GgmlType type = GgmlType::f32;
  uint64_t offset = 0;        // relative to the start of the tensor-data section
  uint64_t n_bytes = 0;       // size of the data in bytes
  const uint8_t* data = nullptr;  // points into the mapping; valid while the GgufFile lives
  uint64_t n_elements() const;
};

// A parsed, memory-mapped GGUF file. Movable, not copyable.
class GgufFile {
 public:
  // Opens and fully validates `path`. Throws GgufError (never reads out of range).
  static GgufFile open(const std::string& path);
  // Parses an in-memory image (used by tests and fuzzing); `bytes` is copied.
  static GgufFile from_bytes(std::vector<uint8_t> bytes, const std::string& label = "<memory>");

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint32_t alignment() const { return alignment_; }

  // Metadata: nullptr when absent.
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }

  // Typed getters: throw missing_key when absent, wrong_type when the type cannot convert.
  // Any integer type converts to the requested integer type if it fits.
  uint32_t get_u32(const std::string& key) const;
  int64_t get_i64(const std::string& key) const;
  float get_f32(const std::string& key) const;  // accepts f32/f64 and integers
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  // Optional variants return `fallback` when the key is absent (still throw on wrong type).
  uint32_t get_u32_or(const std::string& key, uint32_t fallback) const;
  float get_f32_or(const std::string& key, float fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;
  std::string get_string_or(const std::string& key, const std::string& fallback) const;
  // Arrays: [n] elements; throw missing_key / wrong_type.
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;
  std::vector<int32_t> get_i32_array(const std::string& key) const;

  // Tensors in file order; tensor() returns nullptr when absent, require_tensor throws
  // missing_key, or wrong_type when `ne` is given and differs.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* tensor(const std::string& name) const;
  const GgufTensorInfo& require_tensor(const std::string& name,
                                       const std::vector<uint64_t>& ne = {}) const;

  // Lets the OS drop the resident pages wholly inside [p, p + n) (bytes of this file's mapping,
  // e.g. a tensor the caller has copied into another layout): madvise(MADV_DONTNEED) on the
  // read-only private mapping, so a later read faults them in again from the file, unchanged.
  // Only residency changes (the process's RSS), never content. Does nothing for from_bytes
  // files or a range outside the mapping.
  void release_pages(const void* p, size_t n) const;

 private:
  GgufFile() = default;
  void parse();
  struct Mapping;
  std::unique_ptr<Mapping> map_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// Converts `n` elements of a tensor of type `type` at `src` to f32 in `dst` (block types through
// cpu::dequantize_row_ref). Throws GgufError(absurd_value) when n is not whole blocks.
void dequantize_to_f32(GgmlType type, const uint8_t* src, float* dst, uint64_t n);

}  // namespace specchat

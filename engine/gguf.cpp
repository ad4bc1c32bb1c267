// GGUF v2/v3 reader. Every read goes through Reader, which checks the remaining length first;
// counts and lengths are checked against the file size before anything is allocated, so a
// malformed or truncated file gives a typed GgufError instead of reading out of range (B19).
#include "engine/gguf.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>
#include <limits>
#include <tuple>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/cpu/quant.h"

namespace specchat {

static_assert(std::endian::native == std::endian::little,
              "GGUF is little endian; this reader copies values without byte swapping");

namespace {

constexpr uint32_t kMaxDims = 4;                          // GGML_MAX_DIMS
constexpr uint64_t kMaxDim = uint64_t(1) << 40;           // no real tensor dim is near this
constexpr uint64_t kMaxElements = uint64_t(1) << 60;      // keeps n_bytes far from overflow
constexpr uint64_t kMaxArrayElements = uint64_t(1) << 24; // each element is a ~48-byte GgufValue
constexpr int kMaxArrayDepth = 8;                         // nested arrays: bounded recursion
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;               // key length, value type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;   // name length, n_dims, type, offset

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::f64); }

}  // namespace

bool gguf_loads_type(DType) {
  return true;  // every type of the vocabulary has CPU kernels (kernels/cpu/linear.h, quant.h)
}

namespace {

bool is_int_type(GgufType t) {
  const auto u = static_cast<uint32_t>(t);  // u8..i32 are 0..5, u64 and i64 are 10 and 11
  return u <= 5 || u == 10 || u == 11;
}

// Indexed by GgufType (0..12).
constexpr const char* kValueTypeNames[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
// Smallest encoded size of one value of each type (bounds counts by the file size); a string
// is at least its u64 length, an array its u32 element type and u64 count.
constexpr uint64_t kMinValueBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};

const char* value_type_name(GgufType t) {
  return known_value_type(static_cast<uint32_t>(t)) ? kValueTypeNames[static_cast<uint32_t>(t)]
                                                    : "unknown";
}

uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

// Bounds-checked little-endian cursor over [base, base + size). `context` names the item being
// read so that errors say what was cut off.
class Reader {
 public:
  Reader(const uint8_t* base, uint64_t size, const std::string& path)
      : base_(base), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }
  void set_context(std::string c) { context_ = std::move(c); }

  [[noreturn]] void fail(GgufErrorKind kind, const std::string& msg) const {
    throw GgufError(kind, path_ + ": " + msg + " (" + context_ + ", offset " +
                              std::to_string(pos_) + ")");
  }

  void need(uint64_t n) const {
    if (n > remaining()) {
      throw GgufError(GgufErrorKind::truncated,
                      path_ + ": truncated: " + context_ + " needs " + std::to_string(n) +
                          " bytes at offset " + std::to_string(pos_) + " but the file ends at " +
                          std::to_string(size_));
    }
  }

  template <class T>
  T read() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string() {
    const uint64_t len = read<uint64_t>();
    if (len > size_) {
      fail(GgufErrorKind::absurd_value, "string length " + std::to_string(len) +
                                            " exceeds the file size " + std::to_string(size_));
    }
    need(len);
    std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
  std::string context_ = "header";
};

GgufValue read_value(Reader& r, GgufType type, int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufType::u8: v.v = uint64_t{r.read<uint8_t>()}; break;
    case GgufType::i8: v.v = int64_t{r.read<int8_t>()}; break;
    case GgufType::u16: v.v = uint64_t{r.read<uint16_t>()}; break;
    case GgufType::i16: v.v = int64_t{r.read<int16_t>()}; break;
    case GgufType::u32: v.v = uint64_t{r.read<uint32_t>()}; break;
    case GgufType::i32: v.v = int64_t{r.read<int32_t>()}; break;
    case GgufType::u64: v.v = r.read<uint64_t>(); break;
    case GgufType::i64: v.v = r.read<int64_t>(); break;
    case GgufType::f32: v.v = double{r.read<float>()}; break;
    case GgufType::f64: v.v = r.read<double>(); break;
    case GgufType::boolean: v.v = r.read<uint8_t>() != 0; break;
    case GgufType::string: v.v = r.read_string(); break;
    case GgufType::array: {
      const uint32_t et = r.read<uint32_t>();
      if (!known_value_type(et)) {
        r.fail(GgufErrorKind::unknown_type, "unknown array element type " + std::to_string(et));
      }
      const uint64_t count = r.read<uint64_t>();
      v.array_type = static_cast<GgufType>(et);
      if (depth >= kMaxArrayDepth) {
        r.fail(GgufErrorKind::absurd_value, "arrays nested deeper than " +
                                                std::to_string(kMaxArrayDepth));
      }
      // A count the whole file cannot hold is absurd; one that merely runs past the end of a
      // cut file is reported as truncated when its elements are read.
      if (count > kMaxArrayElements || count > r.size() / kMinValueBytes[et]) {
        r.fail(GgufErrorKind::absurd_value,
               "array count " + std::to_string(count) + " of " + value_type_name(v.array_type) +
                   " is impossible in a file of " + std::to_string(r.size()) + " bytes");
      }
      std::vector<GgufValue> elems;
      elems.reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) elems.push_back(read_value(r, v.array_type, depth + 1));
      v.v = std::move(elems);
      break;
    }
  }
  return v;
}

std::string dims_string(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

uint64_t tensor_bytes(DType type, uint64_t n) { return dtype_row_bytes(type, n); }

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

// One tensor-info entry: name, shape, type and offset, each checked before use.
GgufTensorInfo read_tensor_info(Reader& r, uint32_t alignment) {
  GgufTensorInfo t;
  t.name = r.read_string();
  r.set_context("tensor '" + t.name + "'");
  const uint32_t n_dims = r.read<uint32_t>();
  if (n_dims > kMaxDims) {
    r.fail(GgufErrorKind::absurd_value, "n_dims " + std::to_string(n_dims) + " > " +
                                            std::to_string(kMaxDims));
  }
  uint64_t n = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t dim = r.read<uint64_t>();
    t.ne.push_back(dim);
    if (dim == 0 || dim > kMaxDim) {
      r.fail(GgufErrorKind::absurd_value, "dimension " + std::to_string(d) + " is " +
                                              std::to_string(dim));
    }
    if (__builtin_mul_overflow(n, dim, &n) || n > kMaxElements) {
      r.fail(GgufErrorKind::absurd_value, "element count of shape " + dims_string(t.ne) +
                                              " overflows");
    }
  }
  const uint32_t type = r.read<uint32_t>();
  const std::optional<DType> dt = dtype_from_ggml(type);
  if (!dt) r.fail(GgufErrorKind::unknown_type, "unknown ggml tensor type " + std::to_string(type));
  if (!gguf_loads_type(*dt)) {
    r.fail(GgufErrorKind::unknown_type, std::string("ggml tensor type ") + dtype_name(*dt) + " (" +
                                            std::to_string(type) + ") is not supported yet");
  }
  t.type = *dt;
  if (dtype_is_block(t.type) &&
      (t.ne.empty() || t.ne[0] % static_cast<uint64_t>(dtype_block_size(t.type)) != 0)) {
    r.fail(GgufErrorKind::absurd_value, std::string(dtype_name(t.type)) + " tensor of shape " + dims_string(t.ne) +
                                            " has ne[0] not a multiple of " +
                                            std::to_string(dtype_block_size(t.type)));
  }
  t.offset = r.read<uint64_t>();
  if (t.offset % alignment != 0) {
    r.fail(GgufErrorKind::absurd_value, "data offset " + std::to_string(t.offset) +
                                            " is not a multiple of the alignment " +
                                            std::to_string(alignment));
  }
  t.n_bytes = tensor_bytes(t.type, n);
  return t;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in f32.
    const float f = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -f : f;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, or nan keeping the payload
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

const char* gguf_error_kind_name(GgufErrorKind kind) {
  switch (kind) {
    case GgufErrorKind::io: return "io";
    case GgufErrorKind::bad_magic: return "bad_magic";
    case GgufErrorKind::unsupported_version: return "unsupported_version";
    case GgufErrorKind::truncated: return "truncated";
    case GgufErrorKind::data_past_end: return "data_past_end";
    case GgufErrorKind::absurd_value: return "absurd_value";
    case GgufErrorKind::unknown_type: return "unknown_type";
    case GgufErrorKind::missing_key: return "missing_key";
    case GgufErrorKind::wrong_type: return "wrong_type";
  }
  return "unknown";
}

const char* ggml_type_name(GgmlType type) { return dtype_name(type); }

uint64_t GgufTensorInfo::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;  // bounded by kMaxElements at parse time
  return n;
}

// Owns the bytes: an mmap'ed file, or a copied buffer for from_bytes.
struct GgufFile::Mapping {
  void* addr = nullptr;
  size_t len = 0;
  std::vector<uint8_t> owned;
  ~Mapping() {
    if (addr) munmap(addr, len);
  }
};

GgufFile::GgufFile(GgufFile&& o) noexcept { *this = std::move(o); }

GgufFile& GgufFile::operator=(GgufFile&& o) noexcept {
  if (this != &o) {
    map_ = std::move(o.map_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
    version_ = o.version_;
    alignment_ = o.alignment_;
    kv_ = std::move(o.kv_);
    tensors_ = std::move(o.tensors_);
    tensor_index_ = std::move(o.tensor_index_);
  }
  return *this;
}

GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::string& path) {
  auto io_fail = [&](const std::string& what) {
    throw GgufError(GgufErrorKind::io, path + ": cannot " + what + ": " + std::strerror(errno));
  };
  struct Fd {  // closes on every exit; the mapping stays valid without the descriptor
    int fd;
    ~Fd() { if (fd >= 0) ::close(fd); }
  };
  // O_NONBLOCK so that a FIFO does not hang open(); it is refused below as not a regular file.
  const Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) io_fail("open");
  struct stat st {};
  if (fstat(fd.fd, &st) != 0) io_fail("stat");
  if (!S_ISREG(st.st_mode)) throw GgufError(GgufErrorKind::io, path + ": not a regular file");
  GgufFile f;
  f.path_ = path;
  f.map_ = std::make_unique<Mapping>();
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ > 0) {  // mmap of length 0 fails; an empty file is reported as truncated by parse
    void* p = mmap(nullptr, static_cast<size_t>(f.size_), PROT_READ, MAP_PRIVATE, fd.fd, 0);
    if (p == MAP_FAILED) io_fail("mmap");
    f.map_->addr = p;
    f.map_->len = static_cast<size_t>(f.size_);
    f.base_ = static_cast<const uint8_t*>(p);
  }
  f.parse();
  return f;
}

GgufFile GgufFile::from_bytes(std::vector<uint8_t> bytes, const std::string& label) {
  GgufFile f;
  f.path_ = label;
  f.map_ = std::make_unique<Mapping>();
  f.map_->owned = std::move(bytes);
  f.base_ = f.map_->owned.data();
  f.size_ = f.map_->owned.size();
  f.parse();
  return f;
}

void GgufFile::parse() {
  Reader r(base_, size_, path_);
  r.set_context("magic");
  // A cut-off file whose first bytes still read "GGUF" is truncated; anything else is bad_magic.
  if (size_ > 0 && std::memcmp(base_, "GGUF", std::min<uint64_t>(size_, 4)) != 0) {
    r.fail(GgufErrorKind::bad_magic, "bad magic: not a GGUF file (first bytes are not \"GGUF\")");
  }
  r.read<uint32_t>();

  r.set_context("version");
  version_ = r.read<uint32_t>();
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    r.fail(GgufErrorKind::unsupported_version,
           "unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)" +
               (swapped == 2 || swapped == 3 ? "; the file looks big-endian" : ""));
  }
  r.set_context("counts");
  const uint64_t tensor_count = r.read<uint64_t>();
  const uint64_t kv_count = r.read<uint64_t>();
  // Bounded by what the whole file could hold, so the loops and reserve() below are bounded.
  for (auto [count, min_bytes, what] : {std::tuple{kv_count, kMinKvBytes, "metadata count"},
                                        {tensor_count, kMinTensorInfoBytes, "tensor count"}}) {
    if (count > size_ / min_bytes) {
      r.fail(GgufErrorKind::absurd_value, std::string(what) + " " + std::to_string(count) +
                                              " is impossible in a file of " +
                                              std::to_string(size_) + " bytes");
    }
  }

  for (uint64_t i = 0; i < kv_count; ++i) {
    r.set_context("metadata entry #" + std::to_string(i));
    std::string key = r.read_string();
    r.set_context("metadata key '" + key + "'");
    const uint32_t type = r.read<uint32_t>();
    if (!known_value_type(type)) {
      r.fail(GgufErrorKind::unknown_type, "unknown metadata value type " + std::to_string(type));
    }
    GgufValue value = read_value(r, static_cast<GgufType>(type), 0);
    if (kv_.count(key)) r.fail(GgufErrorKind::absurd_value, "duplicate metadata key");
    kv_.emplace(std::move(key), std::move(value));
  }

  if (has("general.alignment")) {
    const uint32_t a = get_u32("general.alignment");  // wrong_type unless an integer
    if (a == 0 || (a & (a - 1)) != 0) {
      throw GgufError(GgufErrorKind::absurd_value, path_ + ": general.alignment " +
                                                       std::to_string(a) + " is not a power of 2");
    }
    alignment_ = a;
  }

  tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    r.set_context("tensor info #" + std::to_string(i));
    GgufTensorInfo t = read_tensor_info(r, alignment_);
    if (tensor_index_.count(t.name)) r.fail(GgufErrorKind::absurd_value, "duplicate tensor name");
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // Every tensor's data must lie inside the file (B19); the error names the first that does
  // not, with the size the file should have. pos <= size < 2^63, so the padding cannot overflow.
  const uint64_t data_start = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  const GgufTensorInfo* bad = nullptr;
  uint64_t expected = 0;
  for (const GgufTensorInfo& t : tensors_) {
    const uint64_t end = sat_add(sat_add(data_start, t.offset), t.n_bytes);
    expected = std::max(expected, end);
    if (end > size_ && !bad) bad = &t;
  }
  if (bad) {
    throw GgufError(
        GgufErrorKind::data_past_end,
        path_ + ": tensor '" + bad->name + "' (#" + std::to_string(bad - tensors_.data()) +
            " of " + std::to_string(tensors_.size()) + ", " + ggml_type_name(bad->type) + " " +
            dims_string(bad->ne) + ", " + std::to_string(bad->n_bytes) +
            " bytes at data offset " + std::to_string(bad->offset) +
            ") lies past the end of the file: expected file size " + std::to_string(expected) +
            " bytes, actual " + std::to_string(size_) + " bytes (truncated download?)");
  }
  for (GgufTensorInfo& t : tensors_) t.data = base_ + data_start + t.offset;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {

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

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::require_tensor(const std::string& name,
                                               const std::vector<uint64_t>& ne) const {
  const GgufTensorInfo* t = tensor(name);
  if (!t) throw GgufError(GgufErrorKind::missing_key, path_ + ": tensor '" + name + "' is missing");
  if (!ne.empty() && t->ne != ne) {
    throw GgufError(GgufErrorKind::wrong_type, path_ + ": tensor '" + name + "' has shape " +
                                                   dims_string(t->ne) + ", expected " +
                                                   dims_string(ne));
  }
  return *t;
}

void dequantize_to_f32(GgmlType type, const uint8_t* src, float* dst, uint64_t n) {
  switch (type) {
    case GgmlType::f32:
      if (n) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::f16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    case GgmlType::bf16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
      }
      return;
    case GgmlType::q8_0: case GgmlType::q4_0: case GgmlType::q4_k: case GgmlType::q5_k: case GgmlType::q6_k:
      if (n % static_cast<uint64_t>(dtype_block_size(type)) != 0) {
        throw GgufError(GgufErrorKind::absurd_value, std::string("dequantize_to_f32: ") + dtype_name(type) +
                                                         " needs a multiple of " +
                                                         std::to_string(dtype_block_size(type)) + " elements, got " +
                                                         std::to_string(n));
      }
      cpu::dequantize_row_ref(type, src, dst, static_cast<int64_t>(n));
      return;
    default:
      break;
  }
  throw GgufError(GgufErrorKind::unknown_type,
                  std::string("dequantize_to_f32: unsupported type ") + dtype_name(type));
}

}  // namespace specchat

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

#include "engine/gguf_values.h"
#include "kernels/cpu/quant.h"

namespace specchat {

using namespace gguf_detail;

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


}  // namespace

bool gguf_loads_type(DType) {
  return true;  // every type of the vocabulary has CPU kernels (kernels/cpu/linear.h, quant.h)
}

namespace {

// Smallest encoded size of one value of each type (bounds counts by the file size); a string
// is at least its u64 length, an array its u32 element type and u64 count.
constexpr uint64_t kMinValueBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};

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

uint64_t tensor_bytes(DType type, uint64_t n) { return dtype_row_bytes(type, n); }

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

void GgufFile::release_pages(const void* p, size_t n) const {
  if (!map_ || !map_->addr || n == 0) return;
  const auto lo = reinterpret_cast<uintptr_t>(map_->addr), hi = lo + map_->len;
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a < lo || a > hi || n > hi - a) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (a + page - 1) / page * page, last = (a + n) / page * page;
  if (first < last) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
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

}  // namespace specchat

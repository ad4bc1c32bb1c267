#include "engine/gguf_write.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <variant>

namespace specchat {

namespace {

class Out {
 public:
  template <typename T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    buf_.append(b, sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    buf_ += s;
  }
  void pad_to(uint64_t alignment) {
    while (buf_.size() % alignment != 0) buf_.push_back('\0');
  }
  std::string& bytes() { return buf_; }

 private:
  std::string buf_;
};

uint64_t u(const GgufValue& v) {
  if (auto p = std::get_if<uint64_t>(&v.v)) return *p;
  if (auto p = std::get_if<int64_t>(&v.v)) return static_cast<uint64_t>(*p);
  throw std::invalid_argument("write_gguf: integer value expected");
}

void put_value(Out& o, const GgufValue& v, GgufType type) {
  switch (type) {
    case GgufType::u8: o.put<uint8_t>(static_cast<uint8_t>(u(v))); return;
    case GgufType::i8: o.put<int8_t>(static_cast<int8_t>(u(v))); return;
    case GgufType::u16: o.put<uint16_t>(static_cast<uint16_t>(u(v))); return;
    case GgufType::i16: o.put<int16_t>(static_cast<int16_t>(u(v))); return;
    case GgufType::u32: o.put<uint32_t>(static_cast<uint32_t>(u(v))); return;
    case GgufType::i32: o.put<int32_t>(static_cast<int32_t>(u(v))); return;
    case GgufType::u64: o.put<uint64_t>(u(v)); return;
    case GgufType::i64: o.put<int64_t>(static_cast<int64_t>(u(v))); return;
    case GgufType::f32: o.put<float>(static_cast<float>(std::get<double>(v.v))); return;
    case GgufType::f64: o.put<double>(std::get<double>(v.v)); return;
    case GgufType::boolean: o.put<uint8_t>(std::get<bool>(v.v) ? 1 : 0); return;
    case GgufType::string: o.str(std::get<std::string>(v.v)); return;
    case GgufType::array: {
      const auto& el = std::get<std::vector<GgufValue>>(v.v);
      o.put<uint32_t>(static_cast<uint32_t>(v.array_type));
      o.put<uint64_t>(el.size());
      for (const GgufValue& e : el) put_value(o, e, v.array_type);
      return;
    }
  }
}

}  // namespace

void write_gguf(const std::string& path, const std::map<std::string, GgufValue>& kv,
                const std::vector<GgufOutTensor>& tensors, uint32_t alignment) {
  if (alignment == 0 || alignment % 8 != 0) throw std::invalid_argument("write_gguf: alignment must be a multiple of 8");
  Out o;
  o.put<uint32_t>(0x46554747u);  // "GGUF"
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors.size());
  o.put<uint64_t>(kv.size());
  for (const auto& [key, v] : kv) {
    o.str(key);
    o.put<uint32_t>(static_cast<uint32_t>(v.type));
    put_value(o, v, v.type);
  }
  uint64_t offset = 0;
  for (const GgufOutTensor& t : tensors) {
    uint64_t rows = 1;
    for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
    if (t.ne.empty() || dtype_row_bytes(t.type, t.ne[0]) * rows != t.data.size() ||
        t.ne[0] % static_cast<uint64_t>(dtype_block_size(t.type)) != 0) {
      throw std::invalid_argument("write_gguf: tensor '" + t.name + "' has " + std::to_string(t.data.size()) +
                                  " bytes, not what its shape and type " + dtype_name(t.type) + " need");
    }
    o.str(t.name);
    o.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) o.put<uint64_t>(d);
    o.put<uint32_t>(dtype_ggml_id(t.type));
    o.put<uint64_t>(offset);
    offset += (t.data.size() + alignment - 1) / alignment * alignment;
  }
  o.pad_to(alignment);
  {
    // The rename below would replace whatever `path` is: a device, a FIFO or a directory must
    // stay what it is (writing to /dev/null as root would have replaced the device node).
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
      throw GgufError(GgufErrorKind::io, "cannot write " + path + ": not a regular file");
    }
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(o.bytes().data(), static_cast<std::streamsize>(o.bytes().size()));
    const std::string zeros(alignment, '\0');
    for (const GgufOutTensor& t : tensors) {  // streamed: the data is not copied again
      f.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
      f.write(zeros.data(), static_cast<std::streamsize>((alignment - t.data.size() % alignment) % alignment));
    }
    f.flush();
    if (!f) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw GgufError(GgufErrorKind::io, "cannot write " + path);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw GgufError(GgufErrorKind::io, "cannot write " + path + ": " + ec.message());
  }
}

}  // namespace specchat

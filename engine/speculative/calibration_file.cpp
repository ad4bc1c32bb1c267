#include "engine/speculative/calibration_file.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace specchat {

namespace fs = std::filesystem;

std::string calibration_path(const std::string& draft_path) {
  fs::path p(draft_path);
  if (p.extension() == ".gguf") p.replace_extension();
  return p.string() + ".calibration.json";
}

uint64_t file_size_bytes(const std::string& path) { return static_cast<uint64_t>(fs::file_size(path)); }

std::string file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  const uint64_t size = file_size_bytes(path);
  constexpr uint64_t kChunk = 64 * 1024;
  uint64_t h = 1469598103934665603ull;
  std::vector<char> buf(kChunk);
  auto mix = [&](uint64_t off, uint64_t len) {
    in.seekg(static_cast<std::streamoff>(off));
    in.read(buf.data(), static_cast<std::streamsize>(len));
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[static_cast<size_t>(i)]);
      h *= 1099511628211ull;
    }
  };
  mix(0, std::min(size, kChunk));
  if (size > kChunk) mix(std::max(kChunk, size - kChunk), std::min(kChunk, size - kChunk));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace specchat

// Where a model pair's calibration lives and how its model files are recognised (issue 3):
// shared by `specchat-cli calibrate` / `--tree optimal` and the desktop app, which both plan
// Sequoia trees from the same file. The JSON itself is read by the front ends (the engine
// builds without a JSON library); this header holds the file-level conventions.
#pragma once

#include <cstdint>
#include <string>

namespace specchat {

// "<draft path without .gguf>.calibration.json".
std::string calibration_path(const std::string& draft_path);

// FNV-1a 64 over the first and the last 64 KiB of the file (header + vocabulary, and tensor
// data), as 16 lowercase hex digits: cheap for any size; the size is compared separately.
// Throws std::runtime_error when the file cannot be read.
std::string file_fingerprint(const std::string& path);

// The file's size in bytes. Throws std::filesystem::filesystem_error when it is missing.
uint64_t file_size_bytes(const std::string& path);

}  // namespace specchat

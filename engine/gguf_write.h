// GGUF v3 writer: metadata (GgufValue, as the reader returns it) and tensors, for tools that
// make model files (specchat-quantize). Layout: docs/gguf.md of ggml (header, key/value pairs,
// tensor infos, padding to the alignment, tensor data with each tensor aligned).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/gguf.h"

namespace specchat {

// One tensor to write: ne innermost first (ggml order), `data` holds dtype_row_bytes(type, ne[0])
// · (ne[1] · ne[2] · …) bytes.
struct GgufOutTensor {
  std::string name;
  std::vector<uint64_t> ne;
  DType type = DType::f32;
  std::vector<uint8_t> data;
};

// Writes a GGUF v3 file at `path` with every key of `kv` (in key order; values written at the
// width of their GgufType) and the tensors in the given order, each at an offset that is a
// multiple of `alignment` (general.alignment, if in kv, must agree). Writes to `path` + ".tmp"
// and renames, so a failure never leaves a half-written file under `path`. Throws GgufError(io)
// when the file cannot be written or `path` exists and is not a regular file (a device, FIFO or
// directory is never replaced), std::invalid_argument for a tensor whose data size does not
// match its shape and type.
void write_gguf(const std::string& path, const std::map<std::string, GgufValue>& kv,
                const std::vector<GgufOutTensor>& tensors, uint32_t alignment = 32);

}  // namespace specchat

// Quantization of F32/F16/BF16 GGUF models to the block weight types (specchat-quantize): the
// single types Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and llama.cpp's mixes Q4_K_M and Q5_K_M.
//
// Which type each tensor gets (our statement of llama.cpp's llama_tensor_get_type for these
// presets, src/llama-quant.cpp at c392e5094, no imatrix):
// - 1-D tensors (norm weights, biases) keep their type.
// - Single types: every matrix, token_embd and output included, gets the type.
// - Q4_K_M / Q5_K_M: base Q4_K / Q5_K; output.weight Q6_K; blk.i.attn_v.weight and
//   blk.i.ffn_down.weight Q6_K when use_more_bits(i, n_layer) (i < n/8, or i >= 7n/8, or
//   (i − n/8) mod 3 = 2, integer division), else the base type. Q6_K (llama.cpp's "Q6_K" mix)
//   is every matrix Q6_K.
// - A matrix whose rows are not whole blocks of its type (k-quants need ne[0] % 256 = 0) falls
//   back to Q8_0 when ne[0] % 32 = 0 (never fewer bits than asked), else keeps its type.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dtype.h"

namespace specchat {

enum class QuantPreset { q8_0, q4_0, q4_k, q5_k, q6_k, q4_k_m, q5_k_m };

// "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M" (any case); nullopt otherwise.
std::optional<QuantPreset> parse_quant_preset(std::string_view name);
const char* quant_preset_name(QuantPreset p);
// llama.cpp's general.file_type id (llama_ftype) written for a preset: 7, 2, 14, 16, 18, 15, 17
// (pure Q4_K / Q5_K get their _S ids, the nearest llama.cpp preset).
uint32_t quant_preset_file_type(QuantPreset p);

// The type the tensor `name` of shape ne (innermost first) and type `src` gets under preset p in
// a model of n_layer blocks (the rules above).
DType quant_tensor_type(QuantPreset p, const std::string& name, const std::vector<uint64_t>& ne, DType src,
                        int n_layer);

struct QuantizeSummary {
  uint64_t in_bytes = 0, out_bytes = 0;  // tensor data bytes read and written
  std::map<DType, int> tensors_by_type;  // tensors written per type
  // A matrix that did not get its preset's type because its rows are not whole blocks of it
  // (the fallback rule above), in file order: what it was meant to get and what it got.
  struct Fallback {
    std::string tensor;
    uint64_t row_length = 0;  // ne[0], values per row
    DType wanted, written;
  };
  std::vector<Fallback> fallbacks;
};

// Reads the GGUF at `in` (its matrices F32, F16 or BF16; a file with block-type matrices is
// refused: requantizing compounds the error), quantizes with preset p over n_threads threads
// and writes `out` (GGUF v3, same metadata plus general.file_type and
// general.quantization_version = 2; tensors in the input's order). Throws GgufError (unreadable
// or unwritable file) or std::invalid_argument (block-type input, non-finite weights, out == in).
QuantizeSummary quantize_gguf(const std::string& in, const std::string& out, QuantPreset p, int n_threads = 1);

}  // namespace specchat

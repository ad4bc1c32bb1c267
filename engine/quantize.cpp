#include "engine/quantize.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "engine/gguf.h"
#include "engine/gguf_write.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/thread_pool.h"

namespace specchat {

namespace {

struct PresetInfo {
  QuantPreset p;
  const char* name;
  DType base;
  uint32_t file_type;
};

constexpr PresetInfo kPresets[] = {
    {QuantPreset::q8_0, "Q8_0", DType::q8_0, 7},     {QuantPreset::q4_0, "Q4_0", DType::q4_0, 2},
    {QuantPreset::q4_k, "Q4_K", DType::q4_k, 14},    {QuantPreset::q5_k, "Q5_K", DType::q5_k, 16},
    {QuantPreset::q6_k, "Q6_K", DType::q6_k, 18},    {QuantPreset::q4_k_m, "Q4_K_M", DType::q4_k, 15},
    {QuantPreset::q5_k_m, "Q5_K_M", DType::q5_k, 17},
};

const PresetInfo& info(QuantPreset p) {
  for (const PresetInfo& i : kPresets) {
    if (i.p == p) return i;
  }
  throw std::invalid_argument("unknown quantization preset");
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The layer index of "blk.<i>.<rest>", or −1.
int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  size_t end = 4;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  if (end == 4 || end >= name.size() || name[end] != '.') return -1;
  return std::stoi(name.substr(4, end - 4));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::optional<QuantPreset> parse_quant_preset(std::string_view name) {
  std::string up(name);
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const PresetInfo& i : kPresets) {
    if (up == i.name) return i.p;
  }
  return std::nullopt;
}

const char* quant_preset_name(QuantPreset p) { return info(p).name; }

uint32_t quant_preset_file_type(QuantPreset p) { return info(p).file_type; }

namespace {

// The preset's type for a matrix, before the whole-blocks fallback.
DType preset_type(QuantPreset p, const std::string& name, int n_layer) {
  DType t = info(p).base;
  if (p == QuantPreset::q4_k_m || p == QuantPreset::q5_k_m) {
    const int il = layer_of(name);
    if (name == "output.weight") {
      t = DType::q6_k;
    } else if (il >= 0 && (ends_with(name, ".attn_v.weight") || ends_with(name, ".ffn_down.weight")) &&
               use_more_bits(il, n_layer)) {
      t = DType::q6_k;
    }
  }
  return t;
}

bool is_matrix(const std::vector<uint64_t>& ne) { return ne.size() >= 2 && ne[1] > 1; }

}  // namespace

DType quant_tensor_type(QuantPreset p, const std::string& name, const std::vector<uint64_t>& ne, DType src,
                        int n_layer) {
  if (!is_matrix(ne)) return src;  // 1-D: norms and biases
  DType t = preset_type(p, name, n_layer);
  if (ne[0] % static_cast<uint64_t>(dtype_block_size(t)) != 0) {
    t = ne[0] % static_cast<uint64_t>(dtype_block_size(DType::q8_0)) == 0 ? DType::q8_0 : src;
  }
  return t;
}

QuantizeSummary quantize_gguf(const std::string& in, const std::string& out, QuantPreset p, int n_threads) {
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(in, out, ec)) {
    throw std::invalid_argument("the output " + out + " is the input file");
  }
  const GgufFile f = GgufFile::open(in);
  int n_layer = 0;
  for (const GgufTensorInfo& t : f.tensors()) n_layer = std::max(n_layer, layer_of(t.name) + 1);
  for (const GgufTensorInfo& t : f.tensors()) {
    if (dtype_is_block(t.type)) {
      throw std::invalid_argument(in + ": tensor '" + t.name + "' is already " + dtype_name(t.type) +
                                  "; quantize from the F32/F16/BF16 file (requantizing compounds the error)");
    }
  }
  std::map<std::string, GgufValue> kv = f.metadata();
  GgufValue ft;
  ft.type = GgufType::u32;
  ft.v = uint64_t{quant_preset_file_type(p)};
  kv["general.file_type"] = ft;
  GgufValue qv;
  qv.type = GgufType::u32;
  qv.v = uint64_t{2};
  kv["general.quantization_version"] = qv;

  cpu::ThreadPool pool(std::max(1, n_threads));
  QuantizeSummary sum;
  std::vector<GgufOutTensor> outs;
  outs.reserve(f.tensors().size());
  for (const GgufTensorInfo& t : f.tensors()) {
    GgufOutTensor o;
    o.name = t.name;
    o.ne = t.ne;
    o.type = quant_tensor_type(p, t.name, t.ne, t.type, n_layer);
    if (is_matrix(t.ne) && o.type != preset_type(p, t.name, n_layer)) {
      sum.fallbacks.push_back({t.name, t.ne[0], preset_type(p, t.name, n_layer), o.type});
    }
    sum.in_bytes += t.n_bytes;
    if (o.type == t.type) {
      o.data.assign(t.data, t.data + t.n_bytes);
    } else {
      const uint64_t n_in = t.ne[0], rows = t.n_elements() / n_in;
      const uint64_t out_row = dtype_row_bytes(o.type, n_in);
      o.data.resize(out_row * rows);
      std::string failure;
      std::mutex mu;
      const int n_chunks = static_cast<int>(std::min<uint64_t>(rows, 64));
      cpu::parallel_for(&pool, n_chunks, [&](int c) {
        const uint64_t r0 = rows * static_cast<uint64_t>(c) / static_cast<uint64_t>(n_chunks);
        const uint64_t r1 = rows * static_cast<uint64_t>(c + 1) / static_cast<uint64_t>(n_chunks);
        std::vector<float> x(n_in);
        for (uint64_t r = r0; r < r1; ++r) {
          dequantize_to_f32(t.type, t.data + r * dtype_row_bytes(t.type, n_in), x.data(), n_in);
          try {
            cpu::quantize_row(o.type, x.data(), o.data.data() + r * out_row, static_cast<int64_t>(n_in));
          } catch (const std::invalid_argument& e) {
            const std::lock_guard<std::mutex> lock(mu);
            failure = "tensor '" + t.name + "' row " + std::to_string(r) + ": " + e.what();
            return;
          }
        }
      });
      if (!failure.empty()) throw std::invalid_argument(in + ": " + failure);
    }
    sum.out_bytes += o.data.size();
    ++sum.tensors_by_type[o.type];
    outs.push_back(std::move(o));
  }
  write_gguf(out, kv, outs, f.alignment());
  return sum;
}

}  // namespace specchat

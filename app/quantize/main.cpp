// specchat-quantize: F32/F16/BF16 GGUF -> Q8_0, Q4_0, Q4_K, Q5_K, Q6_K or the mixes Q4_K_M,
// Q5_K_M (engine/quantize.h states which tensor gets which type).
//
//   specchat-quantize model-f16.gguf model-q4_k_m.gguf Q4_K_M [--threads N]
//
// Exit status 0 on success, 1 when the input cannot be read or quantized or the output cannot
// be written (a message on stderr; no partial output file is left), 2 for bad arguments.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "engine/gguf.h"
#include "engine/quantize.h"

int main(int argc, char** argv) {
  CLI::App app{"Quantize an F32/F16/BF16 GGUF model to Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q4_K_M or Q5_K_M"};
  std::string in, out, type;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("input", in, "F32/F16/BF16 GGUF file")->required();
  app.add_option("output", out, "GGUF file to write")->required();
  app.add_option("type", type, "Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q4_K_M or Q5_K_M")->required();
  app.add_option("--threads", threads, "threads (default: all cores)")->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
  const auto preset = specchat::parse_quant_preset(type);
  if (!preset) {
    std::fprintf(stderr, "specchat-quantize: unknown type '%s' (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q4_K_M, Q5_K_M)\n",
                 type.c_str());
    return 2;
  }
  try {
    const specchat::QuantizeSummary s = specchat::quantize_gguf(in, out, *preset, threads);
    std::printf("%s -> %s (%s): tensor data %.2f MB -> %.2f MB\n", in.c_str(), out.c_str(),
                specchat::quant_preset_name(*preset), static_cast<double>(s.in_bytes) / 1e6,
                static_cast<double>(s.out_bytes) / 1e6);
    for (const auto& [t, n] : s.tensors_by_type) std::printf("  %-5s %d tensors\n", specchat::dtype_name(t), n);
    // Matrices whose rows are not whole blocks of the asked type got another one: say so, grouped
    // by (row length, asked, written), with the first tensor of each group as an example.
    std::map<std::tuple<uint64_t, specchat::DType, specchat::DType>, std::pair<int, std::string>> groups;
    for (const auto& fb : s.fallbacks) {
      auto& g = groups[{fb.row_length, fb.wanted, fb.written}];
      if (g.first++ == 0) g.second = fb.tensor;
    }
    for (const auto& [key, g] : groups) {
      const auto& [len, wanted, written] = key;
      std::printf("note: %d matri%s with rows of %llu values, not whole %lld-value blocks of %s, written as %s "
                  "instead (never fewer bits than asked), e.g. %s\n",
                  g.first, g.first == 1 ? "x" : "ces", static_cast<unsigned long long>(len),
                  static_cast<long long>(specchat::dtype_block_size(wanted)), specchat::dtype_name(wanted),
                  specchat::dtype_name(written), g.second.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specchat-quantize: %s\n", e.what());
    return 1;
  }
  return 0;
}

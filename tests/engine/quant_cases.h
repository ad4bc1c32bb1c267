// The quantized-GGUF conformance pack (tests/data/quant/, copied from the project's shared
// `cases/quant/`; README there): a model X.gguf, the exact f64 reference logits
// X.seqN.exact.f32 ([len, 4096] f32, row r = prediction after tokens 0..r), the exact greedy
// continuation X.greedy.json, and the tolerances (tolerances.json: per file and sequence the
// absolute tolerance, the rows whose argmax must match and the guaranteed greedy prefix).
#pragma once

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/sampler.h"
#include "test_paths.h"

namespace specchat::test {

inline std::string quant_case(const std::string& name) { return test_data("quant/" + name); }

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// Checks model `file` (e.g. "B-F16") against the pack at `tier` ("exact_math": 1e-3 normalized,
// for kernels that keep activations in f32; "llama_cpp_class": for kernels that round them to 8
// bits). For each sequence: every row of the one-batch logits and of a token-by-token decode
// within abs_tol of the exact reference, the argmax on the decisive rows, and the exact greedy
// tokens up to the guaranteed prefix.
inline void check_quant_case(LlamaModel& m, const std::string& file, const std::string& tier) {
  const nlohmann::json seqs = read_json(quant_case("sequences.json"));
  const nlohmann::json tol = read_json(quant_case("tolerances.json"))["per_file"][file];
  const nlohmann::json greedy = read_json(quant_case(file + ".greedy.json"))["sequences"];
  const size_t nv = static_cast<size_t>(m.config().n_vocab);
  for (const std::string seq : {"seq1", "seq2", "seq3"}) {
    INFO(file << " " << seq << " tier " << tier);
    const std::vector<int32_t> ids = seqs[seq]["ids"].get<std::vector<int32_t>>();
    const std::vector<float> ref = read_f32(quant_case(file + "." + seq + ".exact.f32"));
    REQUIRE(ref.size() == ids.size() * nv);
    const nlohmann::json& t = tol[seq][tier];
    const double abs_tol = t["abs_tol"].get<double>();
    // One batch, every row.
    m.kv().truncate(0);
    const auto batch = m.forward(Batch::chain(ids, 0, true));
    const std::vector<float> rows(batch.begin(), batch.end());
    // Token by token, the last row each time (the decode path).
    m.kv().truncate(0);
    std::vector<float> steps;
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto l = m.forward(Batch::chain(std::span<const int32_t>(&ids[i], 1), static_cast<int>(i), true));
      steps.insert(steps.end(), l.begin(), l.end());
    }
    double worst_batch = 0, worst_step = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      worst_batch = std::max(worst_batch, std::fabs(static_cast<double>(rows[i]) - ref[i]));
      worst_step = std::max(worst_step, std::fabs(static_cast<double>(steps[i]) - ref[i]));
    }
    INFO("max |logit - exact|: one batch " << worst_batch << ", token by token " << worst_step << ", abs_tol "
                                           << abs_tol);
    CHECK(worst_batch <= abs_tol);
    CHECK(worst_step <= abs_tol);
    for (int r : t["decisive_rows"].get<std::vector<int>>()) {
      const std::span<const float> want(ref.data() + static_cast<size_t>(r) * nv, nv);
      const std::span<const float> got(rows.data() + static_cast<size_t>(r) * nv, nv);
      INFO("row " << r);
      CHECK(argmax(got) == argmax(want));
    }
    // Greedy continuation from the prompt, one token per forward.
    const int prefix = t["greedy_guaranteed_prefix"].get<int>();
    const std::vector<int32_t> want = greedy[seq]["exact"]["tokens"].get<std::vector<int32_t>>();
    m.kv().truncate(0);
    std::vector<int32_t> ctx = ids;
    auto logits = m.forward(Batch::chain(ctx, 0, false));
    std::vector<int32_t> got;
    for (int step = 0; step < prefix; ++step) {
      const int32_t next = argmax(logits);
      got.push_back(next);
      ctx.push_back(next);
      logits = m.forward(Batch::chain(std::span<const int32_t>(&ctx.back(), 1), static_cast<int>(ctx.size()) - 1, false));
    }
    CHECK(got == std::vector<int32_t>(want.begin(), want.begin() + prefix));
  }
}

}  // namespace specchat::test

// The engine's PIPO math against the recipe's PyTorch (tests/data/pipo/reference.json, written by
// resources/models/recipe/export_pipo.py from a release unit's F16 weights): the compressor, the
// backbone over latents, the MTP head and confidence head, and greedy decoding at thresholds 0.5
// and 1.0 (docs/design/pipo.md).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/pipo/pipo_release.h"
#include "test_paths.h"

using namespace specchat;
using nlohmann::json;

namespace {

json reference() {
  std::ifstream in(std::string(SPECCHAT_SOURCE_DIR) + "/tests/data/pipo/reference.json");
  REQUIRE(in);
  return json::parse(in);
}

}  // namespace

TEST_CASE("pipo: the engine matches the recipe's PyTorch on the released unit", "[model][pipo]") {
  const json ref = reference();
  const std::string manifest = std::string(SPECCHAT_SOURCE_DIR) + "/" + ref["manifest"].get<std::string>();
  if (!std::filesystem::exists(manifest)) {
    WARN("SKIPPED: the unit the reference was computed from is not here: " << manifest);
    return;
  }
  PipoLoadOptions o;
  o.backbone.n_threads = 1;
  o.backbone.n_seq = 2;
  o.backbone.kv_type = DType::f32;  // PyTorch keeps K/V in f32 (an f16 cache adds ~1e-3)
  PipoUnit u = load_pipo_release(manifest, o);
  REQUIRE(u.info.release == ref["release"].get<std::string>());
  const double tol = ref["tolerance"].get<double>();
  const int d = u.backbone->config().d_model;
  const int nv = u.backbone->config().n_vocab;
  std::vector<int32_t> stops = {u.backbone->vocab().eos_id};
  if (u.backbone->vocab().eot_id >= 0) stops.push_back(u.backbone->vocab().eot_id);
  for (const json& c : ref["cases"]) {
    INFO(c["desc"].get<std::string>());
    const std::vector<int32_t> pairs = c["pairs"].get<std::vector<int32_t>>();
    const int m = static_cast<int>(pairs.size() / 2);
    // Compressor.
    PipoIoScratch sc;
    std::vector<float> lat(static_cast<size_t>(d));
    u.io->compress(pairs[0], pairs[1], lat.data(), sc);
    const auto want_lat = c["latent0"].get<std::vector<double>>();
    for (int i = 0; i < d; ++i) REQUIRE(lat[static_cast<size_t>(i)] == Approx(want_lat[static_cast<size_t>(i)]).margin(tol));
    // Backbone logits at the last pair.
    PipoSession s(u);
    s.sync(pairs);
    const auto want_logits = c["logits"].get<std::vector<double>>();
    double worst = 0;
    for (int i = 0; i < nv; ++i) worst = std::max(worst, std::abs(s.last_logits()[static_cast<size_t>(i)] - want_logits[static_cast<size_t>(i)]));
    CHECK(worst <= tol);
    const int32_t t1 = argmax(s.last_logits());
    REQUIRE(t1 == c["t1"].get<int32_t>());
    // MTP head over every pair's row (the last one with t1) and the confidence head.
    {
      LlamaModel& bb = *u.backbone;
      bb.kv(1).truncate(0);
      Batch b;
      b.seq = 1;
      b.embd.resize(static_cast<size_t>(m) * d);
      for (int j = 0; j < m; ++j) {
        u.io->compress(pairs[2 * j], pairs[2 * j + 1], b.embd.data() + static_cast<size_t>(j) * d, sc);
        b.tokens.push_back(pairs[2 * j]);
        b.pos.push_back(j);
        b.parent.push_back(j - 1);
        b.out_rows.push_back(j);
      }
      const Batch* one[1] = {&b};
      const int32_t layer[1] = {bb.config().n_layer - 1};
      const ForwardOut out = bb.forward(one, layer);
      const std::vector<float> h(out.hidden.begin(), out.hidden.end());
      bb.kv(1).truncate(0);
      std::vector<int32_t> next, pos;
      for (int j = 0; j < m; ++j) {
        next.push_back(j + 1 < m ? pairs[2 * (j + 1)] : t1);
        pos.push_back(j);
      }
      MtpState st;
      std::vector<float> g(static_cast<size_t>(m) * d), hl(static_cast<size_t>(nv));
      u.mtp->forward(next, h.data(), pos, 0, nullptr, st, g.data());
      const float* g_last = g.data() + static_cast<size_t>(m - 1) * d;
      u.mtp->logits(g_last, 1, hl.data(), st);
      const auto want_mtp = c["mtp_logits"].get<std::vector<double>>();
      double worst_mtp = 0;
      for (int i = 0; i < nv; ++i) worst_mtp = std::max(worst_mtp, std::abs(hl[static_cast<size_t>(i)] - want_mtp[static_cast<size_t>(i)]));
      CHECK(worst_mtp <= tol);
      CHECK(argmax(hl) == c["mtp_argmax"].get<int32_t>());
      const float conf = u.io->confidence(h.data() + static_cast<size_t>(m - 1) * d, g_last, sc);
      CHECK(conf == Approx(c["confidence"].get<double>()).margin(tol));
    }
    // Greedy decoding at both thresholds, step by step.
    for (const std::string thr : {"0.5", "1.0"}) {
      INFO("threshold " << thr);
      PipoSession s2(u);
      s2.sync(pairs);
      Rng rng(0);
      for (const json& want : c["continuation"][thr]) {
        const PipoStep stp = s2.step(SamplingParams{}, rng, std::stof(thr), stops);
        CHECK(stp.t1 == want[0].get<int32_t>());
        CHECK(stp.t2 == want[1].get<int32_t>());
        if (stp.stop) break;
      }
    }
  }
}

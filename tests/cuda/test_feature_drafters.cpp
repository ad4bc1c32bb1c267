// [cuda] the drafters that read the target's hidden states (the DFlash block drafter and the
// MTP head, engine/drafters/) serving a target on the GPU: the hidden rows come from the CUDA
// forward, the drafters run on the host, and greedy output must equal the GPU's plain decoding.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/drafters/install.h"
#include "engine/generator.h"
#include "engine/model.h"
#include "engine/runtime/spec_settings.h"

using namespace specchat;

namespace {

std::string root() {
  std::string f = __FILE__;  // <root>/tests/cuda/test_feature_drafters.cpp
  for (int i = 0; i < 3; ++i) f = f.substr(0, f.find_last_of('/'));
  return f;
}
std::string models_dir() {
  if (const char* s = std::getenv("SPECCHAT_MODELS")) return s;
  return root() + "/resources/models";
}

// The first chat prompt of resources/bench/heldout-prompt-ids.txt (text the drafters were
// trained for, so they accept something; the GPU machine has no tokenizer).
std::vector<int32_t> chat_prompt() {
  std::ifstream in(root() + "/resources/bench/heldout-prompt-ids.txt");
  std::string line, kind;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    if (!(ls >> kind) || kind != "chat") continue;
    std::vector<int32_t> ids;
    for (int32_t id = 0; ls >> id;) ids.push_back(id);
    return ids;
  }
  return {};
}

}  // namespace

TEST_CASE("GPU target: the block drafter and the MTP head give plain decoding's greedy tokens", "[cuda][backend][features]") {
  LlamaModel::Options o;
  o.backend = BackendKind::cuda;
  auto target = LlamaModel::load(models_dir() + "/specchat-target.gguf", o);
  Generator g(*target, nullptr);
  FeatureDrafterRequest fr;
  fr.block = fr.mtp = true;
  fr.block_path = models_dir() + "/specchat-dflash.gguf";
  fr.mtp_path = models_dir() + "/specchat-mtp.gguf";
  const FeatureDrafters fd = install_feature_drafters(g.engine(), fr);
  REQUIRE(fd.block_size >= 8);
  REQUIRE(fd.mtp);
  GenerateRequest req;
  req.prompt = chat_prompt();
  REQUIRE(req.prompt.size() > 8);
  req.max_tokens = 64;
  req.spec.draft_k = 0;
  g.clear_cache();
  const GenerationResult base = g.generate(req);
  REQUIRE(base.tokens.size() >= 8);
  struct Case { const char* name; DrafterChoice d; TreeMode mode; int k; };
  for (const Case& c : {Case{"block chain", DrafterChoice::block, TreeMode::chain, 7},
                        Case{"block tree", DrafterChoice::block, TreeMode::dynamic, 16},
                        Case{"mtp chain", DrafterChoice::mtp, TreeMode::chain, 3},
                        Case{"mtp tree", DrafterChoice::mtp, TreeMode::dynamic, 12}}) {
    SpecSettings s;
    s.drafter = c.d;
    s.tree = c.mode;
    s.draft_k = c.k;
    s.node_budget = c.k;
    s.depth = c.d == DrafterChoice::block ? 7 : 4;
    s.branch = 3;
    req.spec = to_spec_config(s);
    g.clear_cache();
    const GenerationResult r = g.generate(req);
    INFO(c.name);
    CHECK(r.tokens == base.tokens);
    CHECK(r.stats.n_accepted > 0);
  }
}

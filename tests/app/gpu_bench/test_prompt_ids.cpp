// resources/bench/heldout-prompt-ids.txt (specchat-gpu-bench's prompts: the GPU machine cannot
// encode text) must be the held-out prompts as `specchat-cli bench` orders and encodes them.
// When this fails, the bundled vocabulary, template or prompt file changed: rerun
// scripts/make-prompt-ids.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model_fixture.h"

using namespace specchat;

TEST_CASE("gpu bench prompt ids equal the bundled tokenizer's encoding of the held-out prompts", "[model]") {
  const std::string root = SPECCHAT_SOURCE_DIR;
  std::ifstream pin(root + "/tests/data/heldout_prompts.json");
  REQUIRE(pin);
  const nlohmann::json j = nlohmann::json::parse(pin);
  std::vector<std::pair<std::string, std::string>> text, chat, order;
  for (const auto& p : j.at("prompts")) {
    (p.at("kind") == "chat" ? chat : text).emplace_back(p.at("kind").get<std::string>(), p.at("text").get<std::string>());
  }
  for (size_t i = 0; i < text.size() || i < chat.size(); ++i) {  // bench's order: text[i], chat[i], ...
    if (i < text.size()) order.push_back(text[i]);
    if (i < chat.size()) order.push_back(chat[i]);
  }
  std::ifstream in(root + "/resources/bench/heldout-prompt-ids.txt");
  REQUIRE(in);
  ModelPair& pair = test::bundled_pair();
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    REQUIRE(n < order.size());
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    std::vector<int32_t> ids;
    for (int32_t id = 0; ls >> id;) ids.push_back(id);
    const auto& [want_kind, txt] = order[n];
    INFO("prompt " << n << ": " << txt);
    CHECK(kind == want_kind);
    CHECK(ids == (want_kind == "chat" ? pair.encode_chat({{"user", txt}}) : pair.encode_prompt(txt)));
    ++n;
  }
  CHECK(n == 20);
}

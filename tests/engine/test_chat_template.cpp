// Chat templates: each name renders the exact text of its model family.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/chat_template.h"
#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "engine/vocab.h"
#include "test_paths.h"

using namespace specchat;

namespace {
const std::vector<ChatMessage> kOneTurn = {{"user", "Hi"}};
const std::vector<ChatMessage> kSystemTurn = {{"system", "Be brief."}, {"user", "Hi"}};
const std::vector<ChatMessage> kTwoTurns = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}};
}  // namespace

TEST_CASE("chat template names", "[unit]") {
  CHECK(chat_template_names() ==
        std::vector<std::string>{"specchat", "llama2", "chatml", "zephyr", "vicuna"});
  CHECK_THROWS_AS(render_chat("alpaca", kOneTurn), std::invalid_argument);
  CHECK_THROWS_WITH(render_chat("alpaca", kOneTurn), Catch::Contains("alpaca"));
  CHECK_THROWS_AS(render_chat("specchat", {{"tool", "x"}}), std::invalid_argument);
}

TEST_CASE("specchat template (bundled models)", "[unit]") {
  CHECK(render_chat("specchat", kOneTurn) == "<|user|>\nHi<|end|>\n<|assistant|>\n");
  CHECK(render_chat("specchat", kOneTurn, false) == "<|user|>\nHi<|end|>\n");
  CHECK(render_chat("specchat", kSystemTurn) ==
        "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n");
  CHECK(render_chat("specchat", kTwoTurns) ==
        "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n"
        "<|user|>\n2+2?<|end|>\n<|assistant|>\n");
  CHECK(render_chat("specchat", {}) == "<|assistant|>\n");
  CHECK(render_chat("specchat", {}, false).empty());
}

TEST_CASE("llama2 template", "[unit]") {
  CHECK(render_chat("llama2", kOneTurn) == "[INST] Hi [/INST]");
  CHECK(render_chat("llama2", kSystemTurn) == "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]");
  CHECK(render_chat("llama2", kTwoTurns) ==
        "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] 2+2? [/INST]");
  CHECK(render_chat("llama2", {{"user", "  padded \n"}}) == "[INST] padded [/INST]");  // strip()
  CHECK(render_chat("llama2", {{"user", "a"}, {"assistant", "b"}}) == "[INST] a [/INST] b </s>");
}

TEST_CASE("chatml template", "[unit]") {
  CHECK(render_chat("chatml", kOneTurn) ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(render_chat("chatml", kTwoTurns, false) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n");
}

TEST_CASE("zephyr template", "[unit]") {
  CHECK(render_chat("zephyr", kOneTurn) == "<|user|>\nHi</s>\n<|assistant|>\n");
  CHECK(render_chat("zephyr", kTwoTurns) ==
        "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n"
        "<|user|>\n2+2?</s>\n<|assistant|>\n");
}

TEST_CASE("vicuna template", "[unit]") {
  CHECK(render_chat("vicuna", kSystemTurn) == "Be brief. USER: Hi ASSISTANT:");
  CHECK(render_chat("vicuna", kTwoTurns) ==
        "Be brief. USER: Hi ASSISTANT: Hello!</s>USER: 2+2? ASSISTANT:");
  CHECK(render_chat("vicuna", kOneTurn) ==
        "A chat between a curious user and an artificial intelligence assistant. The assistant "
        "gives helpful, detailed, and polite answers to the user's questions. USER: Hi ASSISTANT:");
  CHECK(render_chat("vicuna", kOneTurn, false).find("ASSISTANT:") == std::string::npos);
}

TEST_CASE("chat_template_name_for maps GGUF templates to names", "[unit]") {
  for (const auto& n : chat_template_names()) CHECK(chat_template_name_for(n) == n);
  CHECK(chat_template_name_for("").empty());
  CHECK(chat_template_name_for("{% for m in messages %}<|im_start|>{{ m.role }}...").size() > 0);
  CHECK(chat_template_name_for("{{ '<|im_start|>' }}") == "chatml");
  CHECK(chat_template_name_for("{{ bos_token + '[INST] ' + content + ' [/INST]' }}") == "llama2");
  CHECK(chat_template_name_for("{{ '<|user|>\n' + content + eos_token }}{{'</s>'}}") == "zephyr");
  CHECK(chat_template_name_for("<|user|>\n{{c}}<|end|>") == "specchat");
  CHECK(chat_template_name_for("{{ 'USER: ' + c + ' ASSISTANT:' }}") == "vicuna");
  CHECK(chat_template_name_for("{{ '### Instruction:' }}").empty());
}

TEST_CASE("specchat template: control tokens are single ids with the bundled tokenizer",
          "[model]") {
  // The bundled tokenizer is the vocabulary of the bundled target GGUF (in the repository).
  const std::string path = specchat::test::target_model();
  INFO("bundled model missing: " << path << " (it is part of the repository: resources/models)");
  REQUIRE(std::filesystem::exists(path));
  const Tokenizer tok(Vocab::from_gguf(GgufFile::open(path)));
  const Vocab& v = tok.vocab();
  const std::string text = render_chat("specchat", kTwoTurns);
  std::vector<std::string> pieces;
  for (int32_t id : tok.encode(text)) pieces.push_back(v.pieces[static_cast<size_t>(id)]);
  // Every marker the template writes is one user-defined piece of the bundled tokenizer.
  for (const char* marker : {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"}) {
    INFO(marker);
    const auto it = std::find(v.pieces.begin(), v.pieces.end(), std::string(marker));
    REQUIRE(it != v.pieces.end());
    CHECK(v.types[static_cast<size_t>(it - v.pieces.begin())] == TokenType::user_defined);
    CHECK(std::count(pieces.begin(), pieces.end(), std::string(marker)) > 0);
  }
  CHECK(std::count(pieces.begin(), pieces.end(), std::string("<|end|>")) == 4);
  CHECK(std::count(pieces.begin(), pieces.end(), std::string("<|assistant|>")) == 2);
}

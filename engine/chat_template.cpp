// Chat templates by name. Each renderer writes exactly the text the model family was trained on,
// minus the leading BOS, which the caller adds as an id.
#include "engine/chat_template.h"

#include <functional>
#include <stdexcept>

namespace specchat {
namespace {

void check_role(const ChatMessage& m) {
  if (m.role != "system" && m.role != "user" && m.role != "assistant") {
    throw std::invalid_argument("chat message has unknown role \"" + m.role +
                                "\" (expected system, user or assistant)");
  }
}

// specchat (bundled models; resources/models/recipe/common.py chat_text):
//   <|system|>\n{sys}<|end|>\n  <|user|>\n{text}<|end|>\n  <|assistant|>\n{text}<|end|>\n
// The chat control tokens are user-defined pieces, matched atomically by the tokenizer.
std::string render_specchat(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string s;
  for (const auto& m : msgs) s += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  if (gen) s += "<|assistant|>\n";
  return s;
}

// Strips leading and trailing ASCII whitespace, as the reference templates' content.strip().
std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// llama2 (Meta's chat_completion / the HF chat template of Llama-2-chat):
//   [INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] {user} [/INST]
// The system prompt goes inside the first user turn. The first <s> is the caller's BOS id; the
// "</s><s>" between turns are written as text, as the reference template renders eos_token and
// bos_token, so they become EOS/BOS ids only with a tokenizer that parses special tokens.
std::string render_llama2(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string s, system;
  bool open = false;  // inside "[INST] ..." waiting for " [/INST]"
  bool first_turn = true;
  for (const auto& m : msgs) {
    if (m.role == "system") {
      system += (system.empty() ? "" : "\n") + strip(m.content);
      continue;
    }
    if (m.role == "user") {
      if (open) s += " [/INST]";  // two user turns in a row: close the first
      s += first_turn ? "[INST] " : "<s>[INST] ";
      if (!system.empty()) {
        s += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
        system.clear();
      }
      s += strip(m.content);
      open = true;
      first_turn = false;
    } else {  // assistant
      if (open) s += " [/INST]";
      s += " " + strip(m.content) + " </s>";
      open = false;
      first_turn = false;
    }
  }
  if (!system.empty()) {  // a system prompt with no user turn after it
    s += std::string(first_turn ? "" : "<s>") + "[INST] <<SYS>>\n" + system + "\n<</SYS>>\n\n";
    open = true;
  }
  if (open) s += " [/INST]";
  (void)gen;  // the reply follows " [/INST]" directly: there is no separate generation prompt
  return s;
}

// chatml (OpenAI ChatML, used by Qwen, OpenHermes, ...):
//   <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
std::string render_chatml(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string s;
  for (const auto& m : msgs) s += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (gen) s += "<|im_start|>assistant\n";
  return s;
}

// zephyr (HuggingFaceH4/zephyr-7b-beta): <|{role}|>\n{content}</s>\n ... <|assistant|>\n
std::string render_zephyr(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string s;
  for (const auto& m : msgs) s += "<|" + m.role + "|>\n" + m.content + "</s>\n";
  if (gen) s += "<|assistant|>\n";
  return s;
}

// vicuna v1.1 (FastChat "vicuna_v1.1": sep " ", sep2 "</s>"):
//   {system} USER: {user} ASSISTANT: {assistant}</s>USER: {user} ASSISTANT:
// FastChat's default system prompt is used when the messages have none.
std::string render_vicuna(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string system;
  for (const auto& m : msgs) {
    if (m.role == "system") system += (system.empty() ? "" : "\n") + m.content;
  }
  if (system.empty()) {
    system =
        "A chat between a curious user and an artificial intelligence assistant. "
        "The assistant gives helpful, detailed, and polite answers to the user's questions.";
  }
  std::string s = system + " ";
  for (const auto& m : msgs) {
    if (m.role == "user") s += "USER: " + m.content + " ";
    if (m.role == "assistant") s += "ASSISTANT: " + m.content + "</s>";
  }
  if (gen) s += "ASSISTANT:";
  return s;
}

using Renderer = std::function<std::string(const std::vector<ChatMessage>&, bool)>;

const std::vector<std::pair<std::string, Renderer>>& renderers() {
  static const std::vector<std::pair<std::string, Renderer>> r = {
      {"specchat", render_specchat}, {"llama2", render_llama2}, {"chatml", render_chatml},
      {"zephyr", render_zephyr},     {"vicuna", render_vicuna},
  };
  return r;
}

}  // namespace

std::string render_chat(const std::string& template_name, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt) {
  for (const auto& [name, render] : renderers()) {
    if (name != template_name) continue;
    for (const auto& m : messages) check_role(m);
    return render(messages, add_generation_prompt);
  }
  std::string known;
  for (const auto& n : chat_template_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown chat template \"" + template_name + "\" (known: " + known +
                              ")");
}

std::vector<std::string> chat_template_names() {
  std::vector<std::string> names;
  for (const auto& r : renderers()) names.push_back(r.first);
  return names;
}

std::string chat_template_name_for(const std::string& gguf_template) {
  if (gguf_template.empty()) return "";
  for (const auto& r : renderers()) {
    if (r.first == gguf_template) return r.first;
  }
  auto has = [&](const char* s) { return gguf_template.find(s) != std::string::npos; };
  // Order matters: zephyr and specchat share <|user|>; they differ in the end-of-turn marker.
  if (has("<|im_start|>")) return "chatml";
  if (has("[INST]")) return "llama2";
  if (has("<|user|>") && has("<|end|>")) return "specchat";
  if (has("<|user|>") && has("</s>")) return "zephyr";
  if (has("USER: ") && has("ASSISTANT:")) return "vicuna";
  return "";
}

}  // namespace specchat

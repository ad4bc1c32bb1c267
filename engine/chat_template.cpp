// Chat templates by name. Each renderer writes exactly the text of its model family's reference
// template (the Hugging Face `chat_template` of the models named below), minus the leading BOS,
// which the caller adds as an id, with the template's control tokens as markers.
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

// Pieces under construction: adjacent text is joined, markers stay single.
struct Out {
  std::vector<ChatPiece> pieces;
  Out& text(const std::string& s) {
    if (s.empty()) return *this;
    if (!pieces.empty() && !pieces.back().marker) {
      pieces.back().text += s;
    } else {
      pieces.push_back({s, false});
    }
    return *this;
  }
  Out& mark(const std::string& s) {
    if (!s.empty()) pieces.push_back({s, true});
    return *this;
  }
};

// Strips leading and trailing ASCII whitespace, as the reference templates' strip()/trim.
std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The system messages joined, and the other messages with the system text put in front of the
// first user message ("{system}\n\n{user}"): the templates that have no system role (Mistral
// instruct, Gemma) do so.
std::vector<ChatMessage> fold_system(const std::vector<ChatMessage>& msgs) {
  std::string system;
  std::vector<ChatMessage> rest;
  for (const auto& m : msgs) {
    if (m.role == "system") {
      system += (system.empty() ? "" : "\n") + m.content;
    } else {
      rest.push_back(m);
    }
  }
  if (system.empty()) return rest;
  for (auto& m : rest) {
    if (m.role == "user") {
      m.content = system + "\n\n" + m.content;
      return rest;
    }
  }
  rest.push_back({"user", system});  // a system prompt with no user turn: it becomes one
  return rest;
}

// specchat (bundled models; resources/models/recipe/common.py chat_text) and Phi-3
// (microsoft/Phi-3-mini-4k-instruct):
//   <|system|>\n{sys}<|end|>\n  <|user|>\n{text}<|end|>\n  <|assistant|>\n{text}<|end|>\n
// Phi-3 ends a prompt without generation prompt with EOS.
void render_specchat(Out& o, const std::vector<ChatMessage>& msgs, bool gen, const ChatSpecials&) {
  for (const auto& m : msgs) o.mark("<|" + m.role + "|>").text("\n" + m.content).mark("<|end|>").text("\n");
  if (gen) o.mark("<|assistant|>").text("\n");
}

void render_phi3(Out& o, const std::vector<ChatMessage>& msgs, bool gen, const ChatSpecials& sp) {
  render_specchat(o, msgs, gen, sp);
  if (!gen) o.mark(sp.eos);
}

// llama2 (Meta's chat_completion / the HF chat template of Llama-2-chat):
//   [INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] {user} [/INST]
// The system prompt goes inside the first user turn. The first <s> is the caller's BOS id; the
// "</s><s>" between turns are the model's EOS and BOS markers.
void render_llama2(Out& o, const std::vector<ChatMessage>& msgs, bool, const ChatSpecials& sp) {
  std::string system;
  bool open = false;  // inside "[INST] ..." waiting for " [/INST]"
  bool first_turn = true;
  for (const auto& m : msgs) {
    if (m.role == "system") {
      system += (system.empty() ? "" : "\n") + strip(m.content);
      continue;
    }
    if (m.role == "user") {
      if (open) o.text(" [/INST]");  // two user turns in a row: close the first
      if (!first_turn) o.mark(sp.bos);
      o.text("[INST] ");
      if (!system.empty()) {
        o.text("<<SYS>>\n" + system + "\n<</SYS>>\n\n");
        system.clear();
      }
      o.text(strip(m.content));
      open = true;
      first_turn = false;
    } else {  // assistant
      if (open) o.text(" [/INST]");
      o.text(" " + strip(m.content) + " ").mark(sp.eos);
      open = false;
      first_turn = false;
    }
  }
  if (!system.empty()) {  // a system prompt with no user turn after it
    if (!first_turn) o.mark(sp.bos);
    o.text("[INST] <<SYS>>\n" + system + "\n<</SYS>>\n\n");
    open = true;
  }
  if (open) o.text(" [/INST]");
  // The reply follows " [/INST]" directly: there is no separate generation prompt.
}

// llama3 (meta-llama/Meta-Llama-3-8B-Instruct):
//   <|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|> ...
//   <|start_header_id|>assistant<|end_header_id|>\n\n
void render_llama3(Out& o, const std::vector<ChatMessage>& msgs, bool gen, const ChatSpecials&) {
  for (const auto& m : msgs) {
    o.mark("<|start_header_id|>").text(m.role).mark("<|end_header_id|>").text("\n\n" + strip(m.content));
    o.mark("<|eot_id|>");
  }
  if (gen) o.mark("<|start_header_id|>").text("assistant").mark("<|end_header_id|>").text("\n\n");
}

// chatml (OpenAI ChatML, used by Qwen 2/2.5/3, OpenHermes, ...):
//   <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
void render_chatml(Out& o, const std::vector<ChatMessage>& msgs, bool gen, const ChatSpecials&) {
  for (const auto& m : msgs) o.mark("<|im_start|>").text(m.role + "\n" + m.content).mark("<|im_end|>").text("\n");
  if (gen) o.mark("<|im_start|>").text("assistant\n");
}

// mistral (mistralai/Mistral-7B-Instruct-v0.1/v0.2): [INST] {user} [/INST]{assistant}</s>
// [INST] {user} [/INST]; the system prompt is put before the first user message.
void render_mistral(Out& o, const std::vector<ChatMessage>& msgs, bool, const ChatSpecials& sp) {
  for (const auto& m : fold_system(msgs)) {
    if (m.role == "user") {
      o.mark("[INST]").text(" " + m.content + " ").mark("[/INST]");
    } else {
      o.text(m.content).mark(sp.eos);
    }
  }
}

// zephyr (HuggingFaceH4/zephyr-7b-beta): <|{role}|>\n{content}</s>\n ... <|assistant|>\n
void render_zephyr(Out& o, const std::vector<ChatMessage>& msgs, bool gen, const ChatSpecials& sp) {
  for (const auto& m : msgs) o.mark("<|" + m.role + "|>").text("\n" + m.content).mark(sp.eos).text("\n");
  if (gen) o.mark("<|assistant|>").text("\n");
}

// gemma (google/gemma-2-2b-it, gemma-3): <start_of_turn>user\n{content|trim}<end_of_turn>\n
// <start_of_turn>model\n{content|trim}<end_of_turn>\n ... <start_of_turn>model\n; the system
// prompt is put before the first user message.
void render_gemma(Out& o, const std::vector<ChatMessage>& msgs, bool gen, const ChatSpecials&) {
  for (const auto& m : fold_system(msgs)) {
    const std::string role = m.role == "assistant" ? "model" : m.role;
    o.mark("<start_of_turn>").text(role + "\n" + strip(m.content)).mark("<end_of_turn>").text("\n");
  }
  if (gen) o.mark("<start_of_turn>").text("model\n");
}

// vicuna v1.1 (FastChat "vicuna_v1.1": sep " ", sep2 "</s>"):
//   {system} USER: {user} ASSISTANT: {assistant}</s>USER: {user} ASSISTANT:
// FastChat's default system prompt is used when the messages have none.
void render_vicuna(Out& o, const std::vector<ChatMessage>& msgs, bool gen, const ChatSpecials& sp) {
  std::string system;
  for (const auto& m : msgs) {
    if (m.role == "system") system += (system.empty() ? "" : "\n") + m.content;
  }
  if (system.empty()) {
    system =
        "A chat between a curious user and an artificial intelligence assistant. "
        "The assistant gives helpful, detailed, and polite answers to the user's questions.";
  }
  o.text(system + " ");
  for (const auto& m : msgs) {
    if (m.role == "user") o.text("USER: " + m.content + " ");
    if (m.role == "assistant") o.text("ASSISTANT: " + m.content).mark(sp.eos);
  }
  if (gen) o.text("ASSISTANT:");
}

using Renderer = std::function<void(Out&, const std::vector<ChatMessage>&, bool, const ChatSpecials&)>;

const std::vector<std::pair<std::string, Renderer>>& renderers() {
  static const std::vector<std::pair<std::string, Renderer>> r = {
      {"specchat", render_specchat}, {"llama2", render_llama2}, {"llama3", render_llama3},
      {"chatml", render_chatml},     {"mistral", render_mistral}, {"phi3", render_phi3},
      {"zephyr", render_zephyr},     {"gemma", render_gemma},   {"vicuna", render_vicuna},
  };
  return r;
}

}  // namespace

std::vector<ChatPiece> render_chat_pieces(const std::string& template_name,
                                          const std::vector<ChatMessage>& messages,
                                          bool add_generation_prompt, const ChatSpecials& specials) {
  for (const auto& [name, render] : renderers()) {
    if (name != template_name) continue;
    for (const auto& m : messages) check_role(m);
    Out o;
    render(o, messages, add_generation_prompt, specials);
    return o.pieces;
  }
  std::string known;
  for (const auto& n : chat_template_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown chat template \"" + template_name + "\" (known: " + known +
                              ")");
}

std::string chat_pieces_text(const std::vector<ChatPiece>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p.text;
  return s;
}

std::string render_chat(const std::string& template_name, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, const ChatSpecials& specials) {
  return chat_pieces_text(render_chat_pieces(template_name, messages, add_generation_prompt, specials));
}

std::vector<std::string> chat_template_names() {
  std::vector<std::string> names;
  for (const auto& r : renderers()) names.push_back(r.first);
  return names;
}

const std::vector<std::string>& chat_marker_texts() {
  static const std::vector<std::string> m = {
      "<|system|>",     "<|user|>",          "<|assistant|>",     "<|end|>",    "<|im_start|>",
      "<|im_end|>",     "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "[INST]",
      "[/INST]",        "<start_of_turn>",   "<end_of_turn>"};
  return m;
}

std::string chat_template_name_for(const std::string& gguf_template) {
  if (gguf_template.empty()) return "";
  for (const auto& r : renderers()) {
    if (r.first == gguf_template) return r.first;
  }
  auto has = [&](const char* s) { return gguf_template.find(s) != std::string::npos; };
  // Order matters: the most distinctive markers first; zephyr and phi3 share <|user|> and
  // differ in the end-of-turn marker; llama2 and mistral share [INST].
  if (has("<|start_header_id|>")) return "llama3";
  if (has("<|im_start|>")) return "chatml";
  if (has("<start_of_turn>")) return "gemma";
  if (has("[INST]")) return has("<<SYS>>") ? "llama2" : "mistral";
  if (has("<|user|>") && has("<|end|>")) return "phi3";
  if (has("<|user|>") && (has("</s>") || has("eos_token"))) return "zephyr";
  if (has("USER: ") && has("ASSISTANT:")) return "vicuna";
  return "";
}

}  // namespace specchat

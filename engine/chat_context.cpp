#include "engine/chat_context.h"

#include <algorithm>

#include "engine/model.h"
#include "engine/model_pair.h"
#include "engine/tokenizer.h"

namespace specchat {

namespace {

constexpr const char* kSpacePiece = "\xE2\x96\x81";  // U+2581, SentencePiece's space mark

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

ChatContext from_text(const ModelPair& pair, const std::vector<ContextMessage>& messages,
                      std::string reason) {
  std::vector<ChatMessage> plain;
  plain.reserve(messages.size());
  for (const auto& m : messages) plain.push_back(m.message);
  ChatContext c;
  c.prompt = pair.encode_chat(plain);
  c.fallback_reason = std::move(reason);
  return c;
}

}  // namespace

std::vector<int32_t> encode_continuation(const ModelPair& pair, const std::string& text) {
  std::vector<int32_t> ids = pair.tokenizer->encode(text);
  const Vocab& v = pair.tokenizer->vocab();
  if (v.add_space_prefix && !ids.empty() && !text.empty() && text[0] != ' ' &&
      v.pieces[static_cast<size_t>(ids[0])] == kSpacePiece) {
    ids.erase(ids.begin());
  }
  return ids;
}

ChatContext build_chat_context(const ModelPair& pair, const std::vector<ContextMessage>& messages) {
  const uint64_t hash = pair.target->vocab().hash();
  bool any_reply = false;
  for (const auto& m : messages) {
    if (m.message.role != "assistant") continue;
    any_reply = true;
    if (m.ids.empty()) return from_text(pair, messages, "a reply has no stored token ids");
    if (m.tokenizer_hash != hash) {
      return from_text(pair, messages, "a reply was generated with another tokenizer");
    }
    if (m.template_name != pair.template_name) {
      return from_text(pair, messages, "a reply was generated under another chat template");
    }
    const int32_t n_vocab = pair.target->config().n_vocab;
    if (std::any_of(m.ids.begin(), m.ids.end(), [n_vocab](int32_t t) { return t < 0 || t >= n_vocab; })) {
      return from_text(pair, messages, "a reply's stored token ids are out of range");
    }
  }
  if (!any_reply) return from_text(pair, messages, "");

  // Walk the replies: the template text up to each reply's content is encoded (the first
  // piece as a prompt with BOS, later ones as continuations), the reply's stored ids follow.
  ChatContext c;
  std::vector<ChatMessage> plain;
  std::string consumed;  // rendered text covered by c.prompt so far
  for (const auto& m : messages) {
    if (m.message.role == "assistant") {
      const std::string before = render_chat(pair.template_name, plain, true);
      if (!starts_with(before, consumed)) {
        return from_text(pair, messages, "the chat template does not render earlier turns as a prefix");
      }
      const std::string piece = before.substr(consumed.size());
      const std::vector<int32_t> ids =
          consumed.empty() ? pair.encode_prompt(piece) : encode_continuation(pair, piece);
      c.prompt.insert(c.prompt.end(), ids.begin(), ids.end());
      c.prompt.insert(c.prompt.end(), m.ids.begin(), m.ids.end());
      consumed = before + m.message.content;
    }
    plain.push_back(m.message);
  }
  const std::string full = render_chat(pair.template_name, plain, true);
  if (!starts_with(full, consumed)) {
    return from_text(pair, messages, "the chat template does not render earlier turns as a prefix");
  }
  const std::vector<int32_t> tail = encode_continuation(pair, full.substr(consumed.size()));
  c.prompt.insert(c.prompt.end(), tail.begin(), tail.end());
  c.reused_ids = true;
  return c;
}

}  // namespace specchat

#include "engine/chat_context.h"

#include <algorithm>

#include "engine/model.h"
#include "engine/model_pair.h"
#include "engine/tokenizer.h"

namespace specchat {

std::vector<int32_t> encode_continuation(const ModelPair& pair, const std::string& text) {
  return pair.tokenizer->encode(text, false);
}

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool continues_reply(const std::vector<ContextMessage>& messages) {
  return !messages.empty() && messages.back().message.role == "assistant";
}

// The whole conversation encoded from text (encode_chat continues a last assistant message).
ChatContext from_text(const ChatEncoding& pair, const std::vector<ContextMessage>& messages,
                      std::string reason) {
  std::vector<ChatMessage> plain;
  plain.reserve(messages.size());
  for (const auto& m : messages) plain.push_back(m.message);
  ChatContext c;
  c.prompt = encode_chat_ids(*pair.vocab, *pair.tokenizer, pair.template_name, plain);
  c.fallback_reason = std::move(reason);
  return c;
}

// The pieces after the first `skip` bytes of their text; false when `skip` ends inside a marker.
bool pieces_after(const std::vector<ChatPiece>& pieces, size_t skip, std::vector<ChatPiece>& out) {
  out.clear();
  for (const ChatPiece& p : pieces) {
    if (skip >= p.text.size()) {
      skip -= p.text.size();
      continue;
    }
    if (skip > 0 && p.marker) return false;
    out.push_back({p.text.substr(skip), p.marker});
    skip = 0;
  }
  return true;
}

}  // namespace

ChatContext build_chat_context(const ModelPair& pair, const std::vector<ContextMessage>& messages) {
  return build_chat_context(ChatEncoding{&pair.target->vocab(), pair.tokenizer.get(), pair.template_name}, messages);
}

ChatContext build_chat_context(const ChatEncoding& pair, const std::vector<ContextMessage>& messages) {
  const uint64_t hash = pair.vocab->hash();
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
    const int32_t n_vocab = pair.vocab->size();
    if (std::any_of(m.ids.begin(), m.ids.end(), [n_vocab](int32_t t) { return t < 0 || t >= n_vocab; })) {
      return from_text(pair, messages, "a reply's stored token ids are out of range");
    }
    // Stored ids come from files too (import): a control id among them would be a turn boundary
    // no template wrote. The reply's text is encoded instead, where such tokens stay text.
    if (std::any_of(m.ids.begin(), m.ids.end(), [&pair](int32_t t) { return pair.tokenizer->is_protected(t); })) {
      return from_text(pair, messages, "a reply's stored token ids contain control tokens");
    }
  }
  if (!any_reply) return from_text(pair, messages, "");

  // Walk the replies: the template up to each reply's content is encoded (the first part as a
  // prompt with BOS, later ones as continuations), the reply's stored ids follow.
  const char* not_prefix = "the chat template does not render earlier turns as a prefix";
  const Vocab& v = *pair.vocab;
  ChatContext c;
  std::vector<ChatMessage> plain;
  std::vector<ChatPiece> tail;
  std::string consumed;  // rendered text covered by c.prompt so far
  auto append = [&](const std::vector<ChatPiece>& rendered) {
    if (!starts_with(chat_pieces_text(rendered), consumed) || !pieces_after(rendered, consumed.size(), tail)) {
      return false;
    }
    if (consumed.empty() && v.add_bos) c.prompt.push_back(v.bos_id);
    const std::vector<int32_t> ids = pair.tokenizer->encode_chat_pieces(tail, consumed.empty());
    c.prompt.insert(c.prompt.end(), ids.begin(), ids.end());
    return true;
  };
  for (const auto& m : messages) {
    if (m.message.role == "assistant") {
      const std::vector<ChatPiece> before = render_chat_pieces(pair.template_name, plain, true, pair.tokenizer->specials());
      if (!append(before)) return from_text(pair, messages, not_prefix);
      c.prompt.insert(c.prompt.end(), m.ids.begin(), m.ids.end());
      consumed = chat_pieces_text(before) + m.message.content;
    }
    plain.push_back(m.message);
  }
  // A last reply being continued stays open: no end of turn, no new generation prompt.
  if (continues_reply(messages)) {
    c.reused_ids = true;
    return c;
  }
  if (!append(render_chat_pieces(pair.template_name, plain, true, pair.tokenizer->specials()))) {
    return from_text(pair, messages, not_prefix);
  }
  c.reused_ids = true;
  return c;
}

}  // namespace specchat

// The token context of a multi-turn chat, rebuilt from stored token ids (ARCHITECTURE.md §5:
// history is kept with the exact ids the model saw and produced).
//
// A reply's ids are what the target actually generated; re-tokenizing its text can give other
// ids (SentencePiece has many tokenizations of one string and the model may emit a
// non-canonical one). So the next turn's prompt splices the stored ids of every earlier reply
// between the template text around them, and the previous turn's context (prompt + reply) is
// an exact prefix of the new prompt: the generator's KV caches keep it and prefill only the new
// turn. When a reply has no ids, or they were made by another tokenizer or template, or the
// template does not render earlier turns as a prefix of later ones, the whole conversation is
// encoded from text instead (the result is still a valid prompt, only the KV reuse is lost).
// So is a conversation whose stored reply ids hold a control token (Tokenizer::is_protected):
// ids may come from an imported file, and only the chat template inserts control tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/chat_template.h"

namespace specchat {

struct ModelPair;
struct Vocab;
class Tokenizer;

// What encoding a chat needs: a model's vocabulary, its tokenizer and the chat template name
// (a ModelPair's target, or a PIPO backbone). The pointers must outlive the call.
struct ChatEncoding {
  const Vocab* vocab = nullptr;
  const Tokenizer* tokenizer = nullptr;
  std::string template_name;
};

// One message with what storage keeps of it. `ids` of an assistant message: the generated ids
// (EOS/EOT and stop strings excluded); empty = unknown. User/system ids are not needed (they
// are re-encoded from text, deterministically).
struct ContextMessage {
  ChatMessage message;
  std::vector<int32_t> ids;
  uint64_t tokenizer_hash = 0;   // Vocab::hash() of the model that produced `ids`
  std::string template_name;     // chat template the reply was generated under
};

struct ChatContext {
  std::vector<int32_t> prompt;   // [n_prompt] ids, BOS first when the vocabulary wants it
  bool reused_ids = false;       // every earlier reply's stored ids were spliced in
  std::string fallback_reason;   // why not, when !reused_ids and a reply exists ("" otherwise)
};

// Encodes `messages` (ending with the turn to answer) with pair.template_name and the
// generation prompt, reusing stored reply ids as described above. When `messages` ends with an
// assistant message, that reply is *continued*: the prompt ends with its ids (or, without
// usable ids, its text encoded as a continuation) inside its still-open turn, so greedy
// generation from it gives the tokens one uninterrupted reply would have had next. Throws
// GenerationError ("empty_prompt") as ModelPair::encode_prompt, std::invalid_argument for a bad
// role.
ChatContext build_chat_context(const ModelPair& pair, const std::vector<ContextMessage>& messages);
ChatContext build_chat_context(const ChatEncoding& enc, const std::vector<ContextMessage>& messages);

// Encodes plain text that continues a prompt (no BOS, no SentencePiece dummy prefix: that
// belongs to the start of a whole prompt). Control-token texts in it stay text.
std::vector<int32_t> encode_continuation(const ModelPair& pair, const std::string& text);

}  // namespace specchat

// Conversation export (Markdown, self-contained HTML, JSON) and JSON import.
//
// Markdown and HTML are for reading: they show the active path only (what the model saw), with
// a stats line under each reply. JSON is for moving a conversation between databases: every
// stored field of every message, inactive branches included, so an import gives back an
// identical conversation (ids aside, which the importing database assigns).
//
// JSON format "specchat-conversation", version 2 (UTF-8; unknown keys are ignored):
//   { "format": "specchat-conversation", "version": 2,
//     "conversation": { "title", "system_prompt", "created_ms", "updated_ms" },
//     "messages": [ { "role": "system"|"user"|"assistant", "text",
//                     "token_ids": [int, ...]      (raw, unpadded; each 0..2^31-1),
//                     "drafted": [0|1, ...]        (one per token, or empty),
//                     "tokenizer_hash": "<decimal uint64>"  (a string: JSON readers such as
//                                                  JavaScript lose integers above 2^53),
//                     "template_name", "stats": { MessageStats fields },
//                     "parent": int|null   (index in "messages" of the message it follows,
//                                           always an earlier one; null for the first),
//                     "active": bool       (chosen among the messages sharing its parent:
//                                           storage/branches.h; at most one per parent),
//                     "finish": ""|"length"|"eos"|"stop"|"cancelled"|"context_full",
//                     "created_ms",
//                     "latents": { "release", "pairs": [int, ...] }  (optional: a PIPO reply's
//                                  latent-format history, docs/design/pipo.md; pairs of ids,
//                                  -1 = PAD in second slots only) }, ... ] }
// Times are Unix epoch milliseconds. Messages are in insertion order. Version 1 files (no
// "parent"; "active" meant "on the active path") are still read: their branches are rebuilt as
// the schema-5 migration does (branches::infer_legacy_parents).
//
// Qt-free; pure functions except import_json.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "storage/conversation_store.h"

namespace specchat {

// `messages` = all_messages() of the conversation (inactive branches included; Markdown/HTML
// show only active ones). Title as heading, the system prompt, "**You**"/"**Assistant**" turns,
// a stats line under replies. Message text is copied as is (replies are Markdown already).
std::string export_markdown(const Conversation& c, const std::vector<Message>& messages);

// One HTML5 document with inline CSS and no external resources (a Content-Security-Policy
// forbids any); all text HTML-escaped (& < > " '). Drafted tokens cannot be highlighted (no
// per-token text is stored), so each reply shows its stats and how many tokens came from
// accepted drafts.
std::string export_html(const Conversation& c, const std::vector<Message>& messages);

// The JSON format above, pretty-printed (2-space indent, UTF-8 unescaped). Bytes that are not
// valid UTF-8 in a text are replaced by U+FFFD.
// `latents` (ConversationStore::conversation_latents): by message id; a message with an entry
// carries it as "latents" (an import continues its PIPO history without re-prefilling).
std::string export_json(const Conversation& c, const std::vector<Message>& messages,
                        const std::map<int64_t, MessageLatents>& latents = {});

struct ImportedConversation {
  Conversation conversation;  // id 0
  // In file order, conversation_id 0. Version 2: id = index + 1 and parent_id = parent's index
  // + 1 (0 for none), as ConversationStore::import_conversation takes them; version 1: ids and
  // parents 0 (a flat list, given parents on import).
  std::vector<Message> messages;
  std::map<int64_t, MessageLatents> latents;  // by id in `messages` (index + 1)
};

// Parses and checks a "specchat-conversation" version 1 or 2 document. Throws
// StorageError("invalid", "<what is wrong, with the JSON path>"), for example
// "$.messages[2].token_ids[5]: -3 is not a token id (0..2147483647)", on malformed JSON, another
// format or version, a wrong type, a negative token id, a drafted list whose length is neither 0
// nor the token count, an unknown role, a parent that is not an earlier message, two active
// messages sharing a parent, latents that are not a valid pair sequence or have an empty release.
ImportedConversation parse_conversation_json(const std::string& json);

// parse_conversation_json + ConversationStore::import_conversation (one transaction). Returns
// the new conversation's id; on any error nothing is stored. Throws StorageError.
int64_t import_json(ConversationStore& store, const std::string& json);

}  // namespace specchat

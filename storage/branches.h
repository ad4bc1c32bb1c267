// The branch tree of one conversation's messages (schema 5, issue 12 "edit and branches").
//
// Every message follows its parent (Message::parent_id; 0 for the conversation's first message).
// Messages with the same parent are the alternatives of one place: regenerated or continued
// replies, an edited user message beside the one it replaced. Message::active marks the one
// chosen among them (at most one per parent), and the *active path* starts at the chosen first
// message and follows the chosen child of each message down to a message with none. The active
// path is what the chat view shows and what a context is built from (FAULT-KINDS B21: a replaced
// reply never leaks into the context); everything else stays stored, with the branch each
// alternative had below it, so switching back shows that branch again.
//
// These are pure functions over one conversation's messages (no SQL), shared by the store, the
// schema-5 migration, export and import.
#pragma once

#include <cstdint>
#include <vector>

#include "storage/conversation_store.h"

namespace specchat::branches {

// The active path of `all` (one conversation's messages, any order): root first, each next one
// the chosen child of the one before. Messages whose parent is not in `all` are unreachable.
std::vector<Message> active_path(const std::vector<Message>& all);

// The alternatives of message `id` in `all`: the messages with its parent, in id order, `id`
// included. Empty when `id` is not in `all`. They share its role unless a message between was
// deleted (its children then join its alternatives: still reachable, never stranded).
std::vector<Message> alternatives(const std::vector<Message>& all, int64_t id);

// Parents for messages stored before schema 5 (and JSON exports of format version 1), which
// kept only insertion order and an "active" flag meaning "on the active path". `all` is one
// conversation in insertion (id) order; sets each parent_id and leaves `active` as is (on the
// old path means chosen in its group, and every other message was outside it):
//   - a message on the old active path follows the previous one on it, so the active path is
//     exactly the old one;
//   - any other message follows the message stored before it, except that it is an alternative
//     of that message when both have the same role (Regenerate stored the new reply right after
//     the one it replaced; an edit stored the new user message after the old branch).
// Best effort for the inactive branches, exact for the active path.
void infer_legacy_parents(std::vector<Message>& all);

// Checks that `all` (in order) forms a tree the store can hold: every parent_id is 0 or the id
// of an earlier message in `all`, ids are unique and positive, and no two chosen (active)
// messages share a parent. Throws StorageError "invalid" naming the first message that breaks it.
void validate_tree(const std::vector<Message>& all);

}  // namespace specchat::branches

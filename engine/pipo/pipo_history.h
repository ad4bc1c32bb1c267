// PIPO's latent-format history (docs/design/pipo.md, "The pair sequence"): a conversation
// carried on in PIPO continues from the pair sequence its last PIPO reply left (stored beside the
// reply, storage's message_latents), never from its raw ids re-paired: re-pairing raw ids that
// held PADs would feed the backbone other latents than it produced ("raw-token history continued
// as latents scrambles multi-turn chats").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace specchat {

// The raw ids of a pair sequence (PADs dropped).
std::vector<int32_t> pairs_to_raw(std::span<const int32_t> pairs);

// Ids padded to whole pairs: one PAD appended when the count is odd.
std::vector<int32_t> pair_align_ids(std::span<const int32_t> ids);

// The longest prefix of whole pairs of `pairs` (a reply's pairs) that holds no more than `n_raw`
// raw tokens: what a reply cut after its n_raw-th token (a stop string) leaves as latents. A pair
// whose token 2 was cut is dropped whole: its token 1 follows as raw text, re-paired with what
// comes after it (continue_pairs), so no latent stands for tokens the reply does not have.
std::vector<int32_t> kept_reply_pairs(std::span<const int32_t> pairs, size_t n_raw);

// The PIPO prompt for the next turn: `history` (the pair sequence through the last PIPO reply)
// followed by the rest of `full_raw` (the whole conversation's raw prompt, as the lossless path
// builds it) pair-aligned. nullopt when history's raw ids are not a prefix of full_raw (an
// edited or regenerated turn, another template): the caller re-prefills from full_raw
// (pair_align_ids) and says so.
std::optional<std::vector<int32_t>> continue_pairs(std::span<const int32_t> history, std::span<const int32_t> full_raw);

// How a conversation's next PIPO turn starts, and the line the front end shows.
struct PipoContinuation {
  std::vector<int32_t> pairs;  // the prompt pair sequence
  bool from_latents = false;   // continued from the stored latents
  std::string note;            // "" when continued; else why the conversation was re-prefilled
};

// `history`: the latents of the last reply that has them (null: none), with the release that
// made them; `later_lossless`: a lossless reply came after it. Continues when the release is
// `release` and nothing lossless intervened; otherwise re-prefills full_raw with a note (a
// switch between modes is explicit).
PipoContinuation plan_pipo_turn(const std::vector<int32_t>* history, const std::string& history_release,
                                bool later_lossless, const std::string& release, std::span<const int32_t> full_raw);

}  // namespace specchat

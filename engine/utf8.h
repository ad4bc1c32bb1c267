// UTF-8 helpers for streaming decoded token bytes (FAULT-KINDS B17).
//
// Byte-fallback tokens can split one character over several tokens, so the text of a prefix of
// the ids may end in an incomplete sequence. Streaming holds such a tail back until the next
// tokens complete it (utf8_complete_prefix); text that must be valid UTF-8 now (JSON, the UI,
// the final text when generation stopped mid-character) goes through utf8_sanitize. Token ids
// are never changed: only their text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace specchat {

// Length of the longest prefix of `bytes` that does not end in an incomplete multi-byte sequence:
// bytes.size() unless the last 1-3 bytes are the valid beginning of a character still missing
// bytes (Unicode Table 3-7 ranges: E0 A0.., ED 80..9F, F0 90.., F4 80..8F). Ill-formed bytes
// that no later byte can repair are part of the prefix (utf8_sanitize replaces them).
size_t utf8_complete_prefix(std::string_view bytes);

// Copy of `bytes` with each ill-formed or incomplete sequence replaced by U+FFFD, one per
// maximal subpart (Unicode 15, section 3.9, "U+FFFD Substitution of Maximal Subparts").
// The result is always valid UTF-8; valid input is returned unchanged.
std::string utf8_sanitize(std::string_view bytes);

// True when `bytes` is well-formed UTF-8 (no surrogates, no overlongs, nothing above U+10FFFF).
bool utf8_valid(std::string_view bytes);

// `bytes` for an error message or log line: well-formed characters from U+0020 up as they are,
// '"' and '\\' backslash-escaped, ASCII control bytes and every byte of an ill-formed sequence
// as \xNN. The result is valid UTF-8 (so it can go into JSON) and shows where bytes are odd.
std::string utf8_printable(std::string_view bytes);

}  // namespace specchat

// UTF-8 validation, streaming prefix and sanitising (Unicode 15, section 3.9, Table 3-7).
#include "engine/utf8.h"

#include <cstdio>

namespace specchat {
namespace {

// Well-formed sequences by lead byte: total length and the allowed range of the second byte
// (the third and fourth bytes are always 80..BF). len == 0 marks a byte that cannot lead.
struct Lead {
  int len;
  unsigned char lo, hi;
};

Lead lead_of(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};  // continuation byte or overlong C0/C1
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};  // no overlongs
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};  // no overlongs
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  return {0, 0, 0};
}

// Number of bytes at `s[i]` that form a well-formed prefix of one character (>= 1 when the lead
// byte is valid, 0 when not). `full` tells whether that prefix is a whole character.
size_t valid_run(std::string_view s, size_t i, bool* full) {
  const Lead l = lead_of(static_cast<unsigned char>(s[i]));
  *full = false;
  if (l.len == 0) return 0;
  size_t j = 1;
  while (j < static_cast<size_t>(l.len) && i + j < s.size()) {
    const auto c = static_cast<unsigned char>(s[i + j]);
    const bool ok = j == 1 && l.len > 1 ? (c >= l.lo && c <= l.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++j;
  }
  *full = j == static_cast<size_t>(l.len);
  return j;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

size_t utf8_complete_prefix(std::string_view bytes) {
  // Only a character starting in the last 3 bytes can still be missing bytes.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t i = n - back;
    const Lead l = lead_of(static_cast<unsigned char>(bytes[i]));
    if (l.len == 0) continue;  // a continuation byte (or junk): look further back
    bool full = false;
    const size_t run = valid_run(bytes, i, &full);
    // Incomplete only when every byte after the lead belongs to it and more are needed.
    if (!full && i + run == n) return i;
    return n;
  }
  return n;
}

std::string utf8_sanitize(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    bool full = false;
    const size_t run = valid_run(bytes, i, &full);
    if (full) {
      out.append(bytes.substr(i, run));
      i += run;
    } else {
      out.append(kReplacement);  // one U+FFFD per maximal subpart (at least one byte)
      i += run == 0 ? 1 : run;
    }
  }
  return out;
}

bool utf8_valid(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    bool full = false;
    const size_t run = valid_run(bytes, i, &full);
    if (!full) return false;
    i += run;
  }
  return true;
}

std::string utf8_printable(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    bool full = false;
    const size_t run = valid_run(bytes, i, &full);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (full && c >= 0x20 && c != 0x7F) {
      out.append(bytes.substr(i, run));
      i += run;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(c));
      out += buf;
      ++i;
    }
  }
  return out;
}

}  // namespace specchat

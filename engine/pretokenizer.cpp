// Pre-tokenizers for byte-level BPE: PCRE2 for the split, ICU for NFC (see pretokenizer.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/pretokenizer.h"

#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "engine/utf8.h"
#include "engine/vocab.h"

namespace specchat {
namespace {

struct PreSpec {
  const char* name;
  const char* pattern;
  bool nfc, ignore_merges;
};

// Written from each tokenizer.json's Split regex (see the header for the patterns in one line).
const PreSpec kSpecs[] = {
    {"gpt-2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", false,
     false},
    {"llama-bpe",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     false, true},
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     true, false},
};

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Regex() { pcre2_code_free(code); }
};

std::vector<std::string> PreTokenizer::names() {
  std::vector<std::string> n;
  for (const auto& s : kSpecs) n.emplace_back(s.name);
  return n;
}

PreTokenizer::PreTokenizer(const std::string& pre) : name_(pre), re_(std::make_unique<Regex>()) {
  const PreSpec* spec = nullptr;
  for (const auto& s : kSpecs) {
    if (pre == s.name) spec = &s;
  }
  if (spec == nullptr) {
    std::string known;
    for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw VocabError("tokenizer.ggml.pre \"" + utf8_printable(pre) +
                     "\" is not a known byte-level BPE pre-tokenizer (known: " + known + ")");
  }
  nfc_ = spec->nfc;
  ignore_merges_ = spec->ignore_merges;
  int err = 0;
  PCRE2_SIZE at = 0;
  // UTF: code points; UCP: \s, \p{..} and (?i) by Unicode properties; MATCH_INVALID_UTF:
  // ill-formed input is matched around, never an error.
  re_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(spec->pattern), PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
  if (re_->code == nullptr) {
    throw VocabError("pre-tokenizer " + pre + ": PCRE2 cannot compile its pattern at offset " +
                     std::to_string(at) + ": " + pcre2_message(err));
  }
  re_->jit = pcre2_jit_compile(re_->code, PCRE2_JIT_COMPLETE) == 0;  // interpreter otherwise
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::string PreTokenizer::normalize(std::string_view text) const {
  if (!nfc_ || text.empty() || !utf8_valid(text)) return std::string(text);
  UErrorCode st = U_ZERO_ERROR;
  const UNormalizer2* nfc = unorm2_getNFCInstance(&st);
  if (U_FAILURE(st)) throw VocabError(std::string("ICU has no NFC normalizer: ") + u_errorName(st));
  // UTF-8 -> UTF-16 -> NFC -> UTF-8 (ICU's C API normalizes UTF-16).
  int32_t n16 = 0;
  u_strFromUTF8(nullptr, 0, &n16, text.data(), static_cast<int32_t>(text.size()), &st);
  st = U_ZERO_ERROR;  // the preflight reports U_BUFFER_OVERFLOW_ERROR
  std::u16string u(static_cast<size_t>(n16), u'\0');
  u_strFromUTF8(reinterpret_cast<UChar*>(u.data()), n16, nullptr, text.data(),
                static_cast<int32_t>(text.size()), &st);
  if (U_FAILURE(st)) return std::string(text);
  if (unorm2_isNormalized(nfc, reinterpret_cast<const UChar*>(u.data()), n16, &st) && U_SUCCESS(st)) {
    return std::string(text);
  }
  st = U_ZERO_ERROR;
  const int32_t cap = n16 * 3 + 16;  // NFC expands by at most 3x (UAX #15, stream-safe bound)
  std::u16string norm(static_cast<size_t>(cap), u'\0');
  const int32_t nn = unorm2_normalize(nfc, reinterpret_cast<const UChar*>(u.data()), n16,
                                      reinterpret_cast<UChar*>(norm.data()), cap, &st);
  if (U_FAILURE(st)) throw VocabError(std::string("ICU NFC failed: ") + u_errorName(st));
  int32_t n8 = 0;
  u_strToUTF8(nullptr, 0, &n8, reinterpret_cast<const UChar*>(norm.data()), nn, &st);
  st = U_ZERO_ERROR;
  std::string out(static_cast<size_t>(n8), '\0');
  u_strToUTF8(out.data(), n8, nullptr, reinterpret_cast<const UChar*>(norm.data()), nn, &st);
  if (U_FAILURE(st)) throw VocabError(std::string("ICU UTF-8 conversion failed: ") + u_errorName(st));
  return out;
}

std::vector<std::pair<size_t, size_t>> PreTokenizer::split(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(re_->code, nullptr), &pcre2_match_data_free);
  if (!md) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = re_->jit ? pcre2_jit_match(re_->code, subject, text.size(), pos, 0, md.get(), nullptr)
                      : pcre2_match(re_->code, subject, text.size(), pos, 0, md.get(), nullptr);
    // The JIT's machine stack (32 KiB by default) can run out on a huge run of spaces; the
    // interpreter keeps its backtracking on the heap.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(re_->code, subject, text.size(), pos, PCRE2_NO_JIT, md.get(), nullptr);
    }
    size_t b = text.size(), e = text.size();
    if (rc >= 0) {
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      b = ov[0];
      e = ov[1];
    } else if (rc != PCRE2_ERROR_NOMATCH) {
      throw VocabError("pre-tokenizer " + name_ + ": PCRE2 match failed: " + pcre2_message(rc));
    }
    for (; pos < b; ++pos) out.emplace_back(pos, 1);  // unmatched: ill-formed UTF-8 bytes
    if (e == b) {  // no match left, or an empty match (no pattern here has one): step on
      if (b < text.size()) out.emplace_back(b, 1);
      pos = b + 1;
      continue;
    }
    out.emplace_back(b, e - b);
    pos = e;
  }
  return out;
}

}  // namespace specchat

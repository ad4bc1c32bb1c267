// Vocabulary from GGUF metadata, token-to-bytes decoding and the draft/target vocabulary rule.
#include "engine/vocab.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include "engine/bpe.h"
#include "engine/gguf.h"
#include "engine/utf8.h"

namespace specchat {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Runs `read` and turns a GgufError into a VocabError naming the file and `key`.
template <class F>
auto read_key(const GgufFile& f, const std::string& key, F read) -> decltype(read()) {
  try {
    return read();
  } catch (const GgufError& e) {
    throw VocabError(f.path() + ": vocabulary key " + key + ": " + e.what());
  }
}

// Reads an optional token id key: `fallback` when absent; -1 allowed only when `allow_none`.
int32_t read_id(const GgufFile& f, const std::string& key, int32_t fallback, int32_t n_vocab,
                bool allow_none) {
  if (!f.has(key)) return fallback;
  const int64_t v = read_key(f, key, [&] { return f.get_i64(key); });
  // Some converters store "none" as 0xFFFFFFFF in a u32.
  const bool none = v == -1 || v == 0xFFFFFFFFLL;
  if (none && allow_none) return -1;
  if (v < 0 || v >= n_vocab) {
    throw VocabError(f.path() + ": vocabulary key " + key + ": id " + std::to_string(v) +
                     " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
  }
  return static_cast<int32_t>(v);
}

// Parses a byte piece "<0xXX>"; returns -1 when `piece` is not one.
int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Replaces every U+2581 in `piece` with a space.
std::string unescape_spaces(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  size_t i = 0;
  while (i < piece.size()) {
    if (piece.compare(i, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
      out += ' ';
      i += kSpaceSymbol.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

const char* type_name(TokenType t) {
  switch (t) {
    case TokenType::normal: return "normal";
    case TokenType::unknown: return "unknown";
    case TokenType::control: return "control";
    case TokenType::user_defined: return "user_defined";
    case TokenType::unused: return "unused";
    case TokenType::byte: return "byte";
  }
  return "invalid";
}

// A piece quoted for an error message (valid UTF-8 whatever the file holds: see utf8.h).
std::string quoted(std::string_view s) { return "\"" + utf8_printable(s) + "\""; }

std::string describe_entry(const Vocab& v, int32_t id) {
  return quoted(v.pieces[static_cast<size_t>(id)]) + " (" +
         type_name(v.types[static_cast<size_t>(id)]) + ")";
}

bool never_in_text(TokenType t) { return t == TokenType::control || t == TokenType::unused; }

// FNV-1a 64 (http://www.isthe.com/chongo/tech/comp/fnv/), fed in a fixed byte order.
struct Fnv1a {
  uint64_t h = 0xcbf29ce484222325ULL;
  void bytes(std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
  }
  void u32(uint32_t v) {  // little endian, so the hash does not depend on the host
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (8 * i)) & 0xFFu;
      h *= 0x100000001b3ULL;
    }
  }
  void str(std::string_view s) {  // length-prefixed: "ab","c" and "a","bc" hash differently
    u32(static_cast<uint32_t>(s.size()));
    bytes(s);
  }
};

}  // namespace

Vocab Vocab::from_gguf(const GgufFile& f) {
  Vocab v;
  const std::string k_model = "tokenizer.ggml.model", k_tokens = "tokenizer.ggml.tokens",
                    k_scores = "tokenizer.ggml.scores", k_types = "tokenizer.ggml.token_type";
  v.model = read_key(f, k_model, [&] { return f.get_string(k_model); });
  const std::string k_pre = "tokenizer.ggml.pre", k_merges = "tokenizer.ggml.merges";
  v.pre = read_key(f, k_pre, [&] { return f.get_string_or(k_pre, ""); });
  if (f.has(k_merges)) v.merges = read_key(f, k_merges, [&] { return f.get_string_array(k_merges); });
  v.pieces = read_key(f, k_tokens, [&] { return f.get_string_array(k_tokens); });
  const size_t n = v.pieces.size();
  if (n == 0) throw VocabError(f.path() + ": vocabulary key " + k_tokens + " is empty");
  if (n > 0x7FFFFFFF) throw VocabError(f.path() + ": vocabulary key " + k_tokens + " is too long");

  if (f.has(k_scores)) {
    v.scores = read_key(f, k_scores, [&] { return f.get_f32_array(k_scores); });
    if (v.scores.size() != n) {
      throw VocabError(f.path() + ": vocabulary key " + k_scores + " has " +
                       std::to_string(v.scores.size()) + " entries, " + k_tokens + " has " +
                       std::to_string(n));
    }
  } else {
    v.scores.assign(n, 0.0f);
  }

  if (f.has(k_types)) {
    const std::vector<int32_t> raw = read_key(f, k_types, [&] { return f.get_i32_array(k_types); });
    if (raw.size() != n) {
      throw VocabError(f.path() + ": vocabulary key " + k_types + " has " +
                       std::to_string(raw.size()) + " entries, " + k_tokens + " has " +
                       std::to_string(n));
    }
    v.types.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (raw[i] < 1 || raw[i] > 6) {
        throw VocabError(f.path() + ": vocabulary key " + k_types + ": token " + std::to_string(i) +
                         " has unknown type " + std::to_string(raw[i]));
      }
      v.types[i] = static_cast<TokenType>(raw[i]);
    }
  } else {
    v.types.assign(n, TokenType::normal);
  }

  const auto n_vocab = static_cast<int32_t>(n);
  v.bos_id = read_id(f, "tokenizer.ggml.bos_token_id", v.bos_id, n_vocab, false);
  v.eos_id = read_id(f, "tokenizer.ggml.eos_token_id", v.eos_id, n_vocab, false);
  v.unk_id = read_id(f, "tokenizer.ggml.unknown_token_id", v.unk_id, n_vocab, false);
  v.eot_id = read_id(f, "tokenizer.ggml.eot_token_id", -1, n_vocab, true);
  // The defaults above (1, 2, 0) must exist in a tiny vocabulary too.
  for (int32_t id : {v.bos_id, v.eos_id, v.unk_id}) {
    if (id >= n_vocab) {
      throw VocabError(f.path() + ": vocabulary of " + std::to_string(n) +
                       " tokens has no BOS/EOS/UNK ids and is too small for the defaults 1/2/0");
    }
  }
  const std::string k_bos = "tokenizer.ggml.add_bos_token",
                    k_sp = "tokenizer.ggml.add_space_prefix", k_tmpl = "tokenizer.chat_template";
  v.add_bos = read_key(f, k_bos, [&] { return f.get_bool_or(k_bos, true); });
  v.add_space_prefix = read_key(f, k_sp, [&] { return f.get_bool_or(k_sp, true); });
  v.chat_template = read_key(f, k_tmpl, [&] { return f.get_string_or(k_tmpl, ""); });
  return v;
}

std::string Vocab::token_bytes(int32_t id) const {
  if (id < 0 || id >= size()) {
    throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(size()) + ")");
  }
  const auto i = static_cast<size_t>(id);
  const TokenType t = i < types.size() ? types[i] : TokenType::normal;
  if (model == "gpt2") {
    if (t == TokenType::control || t == TokenType::unknown || t == TokenType::unused) return "";
    std::string b;
    if (t == TokenType::normal && bpe_piece_bytes(pieces[i], b)) return b;
    return pieces[i];
  }
  switch (t) {
    case TokenType::control:
    case TokenType::unknown: return "";
    case TokenType::byte: {
      const int b = parse_byte_piece(pieces[i]);
      if (b >= 0) return std::string(1, static_cast<char>(b));
      return unescape_spaces(pieces[i]);  // a "byte" entry that is not <0xXX>: show its text
    }
    default: return unescape_spaces(pieces[i]);
  }
}

std::string Vocab::decode(const std::vector<int32_t>& ids, bool strip_prefix) const {
  std::string out;
  bool at_start = strip_prefix;
  for (int32_t id : ids) {
    std::string b = token_bytes(id);
    // As SentencePiece's decoder: the first piece that is not CONTROL loses one leading '▁'
    // (the dummy prefix); a byte or unknown piece there ends the chance without stripping.
    const auto i = static_cast<size_t>(id);
    const TokenType t = i < types.size() ? types[i] : TokenType::normal;
    if (t == TokenType::control) continue;
    if (at_start && model != "gpt2" && t != TokenType::byte && !b.empty() && b[0] == ' ') b.erase(0, 1);
    at_start = false;
    out += b;
  }
  return out;
}

uint64_t Vocab::hash() const {
  Fnv1a h;
  h.str(model);
  h.u32(static_cast<uint32_t>(pieces.size()));
  for (size_t i = 0; i < pieces.size(); ++i) {
    h.str(pieces[i]);
    h.u32(static_cast<uint32_t>(i < types.size() ? types[i] : TokenType::normal));
  }
  for (int32_t id : {bos_id, eos_id, unk_id, eot_id}) h.u32(static_cast<uint32_t>(id));
  return h.h;
}

VocabCheck check_draft_vocab(const Vocab& target, const Vocab& draft) {
  VocabCheck r;
  auto refuse = [&r](std::string why) {
    r.ok = false;
    r.error = "draft vocabulary refused: " + std::move(why);
    r.warnings.clear();
    return r;
  };
  if (target.model != draft.model) {
    return refuse("tokenizer models differ: target " + quoted(target.model) + ", draft " +
                  quoted(draft.model));
  }
  if (target.types.size() != target.pieces.size() || draft.types.size() != draft.pieces.size()) {
    return refuse("token_type and tokens have different lengths");
  }
  // Sizes may differ only by trailing padding: every entry of the longer vocabulary past the
  // shorter one's end must be UNUSED (what converters write to pad the embedding rows, e.g.
  // "[PAD151936]" in Qwen2.5-7B's 152,064 rows against 0.5B's 151,936).
  const int32_t n_shared = std::min(target.size(), draft.size());
  if (target.size() != draft.size()) {
    const Vocab& longer = target.size() > draft.size() ? target : draft;
    const char* which = &longer == &target ? "target" : "draft";
    for (int32_t id = n_shared; id < longer.size(); ++id) {
      if (longer.types[static_cast<size_t>(id)] != TokenType::unused) {
        return refuse("vocabulary sizes differ: target has " + std::to_string(target.size()) + " tokens, draft has " +
                      std::to_string(draft.size()) + ", and the " + which + "'s extra token " + std::to_string(id) +
                      " is " + describe_entry(longer, id) + ", not padding (only trailing UNUSED entries may differ)");
      }
    }
    r.warnings.push_back(std::string("vocabulary sizes differ by trailing padding: target ") +
                         std::to_string(target.size()) + " tokens, draft " + std::to_string(draft.size()) +
                         "; the draft proposes only ids below " + std::to_string(n_shared));
  }
  const struct {
    const char* name;
    int32_t t, d;
  } ids[] = {{"BOS", target.bos_id, draft.bos_id},
             {"EOS", target.eos_id, draft.eos_id},
             {"EOT", target.eot_id, draft.eot_id}};
  for (const auto& s : ids) {
    if (s.t != s.d) {
      return refuse(std::string(s.name) + " ids differ: target " + std::to_string(s.t) +
                    ", draft " + std::to_string(s.d));
    }
  }
  if (target.add_bos != draft.add_bos) {
    return refuse(std::string("add_bos_token differs: target ") +
                  (target.add_bos ? "true" : "false") + ", draft " +
                  (draft.add_bos ? "true" : "false"));
  }
  for (int32_t id = 0; id < n_shared; ++id) {
    const auto i = static_cast<size_t>(id);
    if (target.pieces[i] == draft.pieces[i] && target.types[i] == draft.types[i]) continue;
    const bool special = id == target.bos_id || id == target.eos_id || id == target.eot_id;
    const bool tolerated =
        never_in_text(target.types[i]) && never_in_text(draft.types[i]) && !special;
    const std::string what = "token " + std::to_string(id) + ": target " +
                             describe_entry(target, id) + ", draft " + describe_entry(draft, id);
    if (!tolerated) {
      return refuse(what + (special ? " (a BOS/EOS/EOT token)" : ""));
    }
    r.warnings.push_back(what + ": accepted, the draft never emits it in text");
  }
  return r;
}

}  // namespace specchat

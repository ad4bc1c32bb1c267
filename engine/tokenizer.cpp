// Tokenizer: SentencePiece or byte-level BPE by tokenizer.ggml.model, and the rule that only
// chat-template markers become control ids (see tokenizer.h).
#include "engine/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <stdexcept>

#include "engine/bpe.h"
#include "engine/pretokenizer.h"
#include "engine/utf8.h"

namespace specchat {
namespace {

std::string status_text(const sentencepiece::util::Status& s) { return s.ToString(); }

bool looks_special(const std::string& s) {
  return s.size() > 4 && s.compare(0, 2, "<|") == 0 && s.compare(s.size() - 2, 2, "|>") == 0;
}

std::unique_ptr<sentencepiece::SentencePieceProcessor> load_proto(const std::string& proto) {
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto st = sp->LoadFromSerializedProto(proto);
  if (!st.ok()) {
    throw VocabError("cannot build a SentencePiece model from the vocabulary: " + status_text(st));
  }
  return sp;
}

}  // namespace

Tokenizer::Tokenizer(const Vocab& vocab, const std::string& spm_model_path) : vocab_(vocab) {
  if (vocab_.model != "llama" && vocab_.model != "gpt2") {
    throw VocabError("tokenizer.ggml.model \"" + utf8_printable(vocab_.model) +
                     "\" is not supported: only \"llama\" (SentencePiece) and \"gpt2\" (byte-level "
                     "BPE) vocabularies can be encoded");
  }
  const size_t n = vocab_.pieces.size();
  if (vocab_.types.size() != n || vocab_.scores.size() != n) {
    throw VocabError("vocabulary arrays differ in length: " + std::to_string(n) + " tokens, " +
                     std::to_string(vocab_.scores.size()) + " scores, " +
                     std::to_string(vocab_.types.size()) + " types");
  }
  const auto& marker_texts = chat_marker_texts();
  const std::string bos_text = vocab_.bos_id >= 0 && static_cast<size_t>(vocab_.bos_id) < n ? vocab_.pieces[static_cast<size_t>(vocab_.bos_id)] : "";
  const std::string eos_text = vocab_.eos_id >= 0 && static_cast<size_t>(vocab_.eos_id) < n ? vocab_.pieces[static_cast<size_t>(vocab_.eos_id)] : "";
  protected_.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = vocab_.types[i];
    const std::string& p = vocab_.pieces[i];
    const auto id = static_cast<int32_t>(i);
    if (t == TokenType::control || t == TokenType::user_defined) markers_.emplace(p, id);
    if (t == TokenType::control) {
      protected_[i] = true;
    } else if (t == TokenType::user_defined) {
      protected_[i] = vocab_.is_eog(id) || id == vocab_.bos_id || looks_special(p) || p == bos_text ||
                      p == eos_text ||
                      std::find(marker_texts.begin(), marker_texts.end(), p) != marker_texts.end();
    }
  }

  if (vocab_.model == "llama") {
    sp_encode_ = load_proto(build_spm_model_proto(vocab_, protected_, false));
    if (spm_model_path.empty()) {
      sp_decode_ = load_proto(build_spm_model_proto(vocab_));
      return;
    }
    sp_decode_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto st = sp_decode_->Load(spm_model_path);
    if (!st.ok())
      throw VocabError(spm_model_path + ": cannot load SentencePiece model: " + status_text(st));
    // The ids the model was trained on are the GGUF's: a tokenizer.model that disagrees would
    // silently feed it other tokens.
    if (sp_decode_->GetPieceSize() != vocab_.size()) {
      throw VocabError(spm_model_path + ": has " + std::to_string(sp_decode_->GetPieceSize()) +
                       " pieces, the model's vocabulary has " + std::to_string(vocab_.size()));
    }
    for (int32_t id = 0; id < vocab_.size(); ++id) {
      if (sp_decode_->IdToPiece(id) != vocab_.pieces[static_cast<size_t>(id)]) {
        throw VocabError(spm_model_path + ": piece " + std::to_string(id) + " is \"" +
                         utf8_printable(sp_decode_->IdToPiece(id)) + "\", the model's vocabulary has \"" +
                         utf8_printable(vocab_.pieces[static_cast<size_t>(id)]) + "\"");
      }
    }
    return;
  }

  // Byte-level BPE.
  if (!spm_model_path.empty()) {
    throw VocabError(spm_model_path + ": a SentencePiece model cannot serve a \"gpt2\" vocabulary");
  }
  if (vocab_.pre.empty()) {
    std::string known;
    for (const auto& name : PreTokenizer::names()) known += (known.empty() ? "" : ", ") + name;
    throw VocabError("the vocabulary is byte-level BPE (\"gpt2\") but names no pre-tokenizer "
                     "(tokenizer.ggml.pre is missing; known: " + known + ")");
  }
  if (vocab_.merges.empty()) {
    throw VocabError("the vocabulary is byte-level BPE (\"gpt2\") but has no merges "
                     "(tokenizer.ggml.merges is missing or empty)");
  }
  pre_ = std::make_unique<PreTokenizer>(vocab_.pre);
  bpe_ = std::make_unique<BpeMerger>(vocab_, pre_->ignore_merges());
  for (size_t i = 0; i < n; ++i) {
    if (vocab_.types[i] == TokenType::user_defined && !protected_[i] && !vocab_.pieces[i].empty()) {
      added_.emplace_back(vocab_.pieces[i], static_cast<int32_t>(i));
    }
  }
  std::stable_sort(added_.begin(), added_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

bool Tokenizer::is_protected(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < protected_.size() && protected_[static_cast<size_t>(id)];
}

int32_t Tokenizer::marker_id(const std::string& marker) const {
  const auto it = markers_.find(marker);
  return it == markers_.end() ? -1 : it->second;
}

ChatSpecials Tokenizer::specials() const {
  ChatSpecials s;
  if (vocab_.bos_id >= 0 && vocab_.bos_id < vocab_.size()) s.bos = vocab_.pieces[static_cast<size_t>(vocab_.bos_id)];
  if (vocab_.eos_id >= 0 && vocab_.eos_id < vocab_.size()) s.eos = vocab_.pieces[static_cast<size_t>(vocab_.eos_id)];
  return s;
}

void Tokenizer::encode_bpe(const std::string& text, std::vector<int32_t>& out) const {
  const std::string norm = pre_->normalize(text);
  for (const auto& [b, len] : pre_->split(norm)) bpe_->encode_word(std::string_view(norm).substr(b, len), out);
}

std::vector<int32_t> Tokenizer::encode_text(const std::string& text, bool prefix) const {
  std::vector<int32_t> out;
  if (text.empty()) return out;
  if (sp_encode_) {
    std::vector<int> ids;
    // The dummy prefix as SentencePiece's normalizer writes it: one escaped space in front.
    const auto st = sp_encode_->Encode(prefix && vocab_.add_space_prefix ? " " + text : text, &ids);
    if (!st.ok()) throw VocabError("SentencePiece encode failed: " + status_text(st));
    out.assign(ids.begin(), ids.end());
    return out;
  }
  // Byte-level BPE: the matched USER_DEFINED pieces split the text (longest first at each
  // position); the runs between them are normalized, pre-tokenized and merged.
  size_t run = 0, i = 0;
  while (i < text.size()) {
    const std::pair<std::string, int32_t>* hit = nullptr;
    for (const auto& a : added_) {
      if (text.compare(i, a.first.size(), a.first) == 0) {
        hit = &a;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    encode_bpe(text.substr(run, i - run), out);
    out.push_back(hit->second);
    i += hit->first.size();
    run = i;
  }
  encode_bpe(text.substr(run), out);
  return out;
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool at_start) const {
  return encode_text(text, at_start);
}

std::vector<int32_t> Tokenizer::encode_chat_pieces(const std::vector<ChatPiece>& pieces,
                                                    bool at_start) const {
  std::vector<int32_t> out;
  std::string text;
  bool prefix = at_start;  // the next text run gets SentencePiece's dummy prefix
  bool first = true;       // nothing emitted yet
  for (const ChatPiece& p : pieces) {
    const int32_t id = p.marker ? marker_id(p.text) : -1;
    if (id < 0) {
      text += p.text;
      continue;
    }
    if (!text.empty()) {
      const auto ids = encode_text(text, prefix);
      out.insert(out.end(), ids.begin(), ids.end());
      text.clear();
    } else if (first && prefix && sp_encode_ && vocab_.add_space_prefix &&
               vocab_.types[static_cast<size_t>(id)] == TokenType::user_defined) {
      // SentencePiece on the whole text puts its dummy prefix before a leading user-defined
      // piece: one "▁" of its own.
      const auto ids = encode_text(" ", false);
      out.insert(out.end(), ids.begin(), ids.end());
    }
    out.push_back(id);
    first = false;
    prefix = vocab_.types[static_cast<size_t>(id)] == TokenType::control;
  }
  const auto ids = encode_text(text, prefix);
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_.size()) {
      throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(vocab_.size()) + ")");
    }
  }
  if (!sp_decode_) return utf8_sanitize(vocab_.decode(ids));
  const std::vector<int> v(ids.begin(), ids.end());
  std::string out;
  const auto st = sp_decode_->Decode(v, &out);
  if (!st.ok()) throw VocabError("SentencePiece decode failed: " + status_text(st));
  return out;
}

}  // namespace specchat

// SentencePiece tokenizer rebuilt from a GGUF vocabulary: a ModelProto written in protobuf wire
// format by hand (https://protobuf.dev/programming-guides/encoding/), field numbers from
// sentencepiece's src/sentencepiece_model.proto (v0.1.97).
#include "engine/tokenizer.h"

#include <sentencepiece_processor.h>

#include <cstring>
#include <stdexcept>
#include <string_view>

#include "engine/utf8.h"

namespace specchat {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kLen = 2, kFixed32 = 5;

// ModelProto fields.
constexpr uint32_t kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
// ModelProto.SentencePiece fields.
constexpr uint32_t kPiecePiece = 1, kPieceScore = 2, kPieceType = 3;
// TrainerSpec fields and TrainerSpec.ModelType values.
constexpr uint32_t kTrainerModelType = 3, kTrainerVocabSize = 4, kTrainerByteFallback = 35,
                   kTrainerUnkId = 40, kTrainerBosId = 41, kTrainerEosId = 42, kTrainerPadId = 43;
constexpr uint32_t kModelTypeBpe = 2;
// NormalizerSpec fields.
constexpr uint32_t kNormName = 1, kNormAddDummyPrefix = 3, kNormRemoveExtraWhitespaces = 4,
                   kNormEscapeWhitespaces = 5;

void put_varint(std::string& o, uint64_t v) {
  while (v >= 0x80) {
    o += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  o += static_cast<char>(v);
}

void put_tag(std::string& o, uint32_t field, uint32_t wire) { put_varint(o, (field << 3) | wire); }

// int32 fields are varints of the value sign-extended to 64 bits: -1 takes 10 bytes.
void put_int32(std::string& o, uint32_t field, int32_t v) {
  put_tag(o, field, kVarint);
  put_varint(o, static_cast<uint64_t>(static_cast<int64_t>(v)));
}

void put_bool(std::string& o, uint32_t field, bool v) {
  put_tag(o, field, kVarint);
  put_varint(o, v ? 1 : 0);
}

void put_bytes(std::string& o, uint32_t field, std::string_view s) {
  put_tag(o, field, kLen);
  put_varint(o, s.size());
  o.append(s);
}

void put_float(std::string& o, uint32_t field, float f) {
  put_tag(o, field, kFixed32);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  for (int i = 0; i < 4; ++i) o += static_cast<char>((bits >> (8 * i)) & 0xFF);  // little endian
}

std::string status_text(const sentencepiece::util::Status& s) { return s.ToString(); }

}  // namespace

std::string build_spm_model_proto(const Vocab& vocab) {
  if (vocab.model != "llama") {
    throw VocabError("tokenizer.ggml.model \"" + utf8_printable(vocab.model) +
                     "\" is not supported: only \"llama\" (SentencePiece) vocabularies can be "
                     "encoded");
  }
  const size_t n = vocab.pieces.size();
  if (vocab.scores.size() != n || vocab.types.size() != n) {
    throw VocabError("vocabulary arrays differ in length: " + std::to_string(n) + " tokens, " +
                     std::to_string(vocab.scores.size()) + " scores, " +
                     std::to_string(vocab.types.size()) + " types");
  }
  std::string proto;
  bool has_bytes = false;
  std::string piece;
  for (size_t i = 0; i < n; ++i) {
    piece.clear();
    put_bytes(piece, kPiecePiece, vocab.pieces[i]);
    put_float(piece, kPieceScore, vocab.scores[i]);
    put_int32(piece, kPieceType, static_cast<int32_t>(vocab.types[i]));
    put_bytes(proto, kModelPieces, piece);
    has_bytes = has_bytes || vocab.types[i] == TokenType::byte;
  }

  // Llama's tokenizer.model is a BPE model whose scores order the merges; SentencePiece's BPE
  // encoder merges the pair whose merged piece has the highest score, as the original does.
  std::string trainer;
  put_int32(trainer, kTrainerModelType, static_cast<int32_t>(kModelTypeBpe));
  put_int32(trainer, kTrainerVocabSize, vocab.size());
  put_bool(trainer, kTrainerByteFallback, has_bytes);
  put_int32(trainer, kTrainerUnkId, vocab.unk_id);
  put_int32(trainer, kTrainerBosId, vocab.bos_id);
  put_int32(trainer, kTrainerEosId, vocab.eos_id);
  put_int32(trainer, kTrainerPadId, -1);
  put_bytes(proto, kModelTrainerSpec, trainer);

  // "identity": no precompiled character map, so text is not normalised; whitespace is kept
  // as is (Llama: no collapsing of runs of spaces, B15) and escaped to U+2581.
  std::string norm;
  put_bytes(norm, kNormName, "identity");
  put_bool(norm, kNormAddDummyPrefix, vocab.add_space_prefix);
  put_bool(norm, kNormRemoveExtraWhitespaces, false);
  put_bool(norm, kNormEscapeWhitespaces, true);
  put_bytes(proto, kModelNormalizerSpec, norm);
  return proto;
}

Tokenizer::Tokenizer(const Vocab& vocab, const std::string& spm_model_path)
    : vocab_(vocab), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  if (spm_model_path.empty()) {
    const auto st = sp_->LoadFromSerializedProto(build_spm_model_proto(vocab_));
    if (!st.ok()) {
      throw VocabError("cannot build a SentencePiece model from the vocabulary: " +
                       status_text(st));
    }
    return;
  }
  const auto st = sp_->Load(spm_model_path);
  if (!st.ok())
    throw VocabError(spm_model_path + ": cannot load SentencePiece model: " + status_text(st));
  // The ids the model was trained on are the GGUF's: a tokenizer.model that disagrees would
  // silently feed it other tokens.
  if (sp_->GetPieceSize() != vocab_.size()) {
    throw VocabError(spm_model_path + ": has " + std::to_string(sp_->GetPieceSize()) +
                     " pieces, the model's vocabulary has " + std::to_string(vocab_.size()));
  }
  for (int32_t id = 0; id < vocab_.size(); ++id) {
    if (sp_->IdToPiece(id) != vocab_.pieces[static_cast<size_t>(id)]) {
      throw VocabError(spm_model_path + ": piece " + std::to_string(id) + " is \"" +
                       utf8_printable(sp_->IdToPiece(id)) + "\", the model's vocabulary has \"" +
                       utf8_printable(vocab_.pieces[static_cast<size_t>(id)]) + "\"");
    }
  }
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int32_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto st = sp_->Encode(text, &ids);
  if (!st.ok()) throw VocabError("SentencePiece encode failed: " + status_text(st));
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<int> v;
  v.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_.size()) {
      throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(vocab_.size()) + ")");
    }
    v.push_back(id);
  }
  std::string out;
  const auto st = sp_->Decode(v, &out);
  if (!st.ok()) throw VocabError("SentencePiece decode failed: " + status_text(st));
  return out;
}

}  // namespace specchat

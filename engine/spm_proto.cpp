// SentencePiece ModelProto from a GGUF vocabulary, written in protobuf wire format by hand
// (https://protobuf.dev/programming-guides/encoding/), field numbers from sentencepiece's
// src/sentencepiece_model.proto (v0.1.97).
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "engine/tokenizer.h"
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

}  // namespace

std::string build_spm_model_proto(const Vocab& vocab) {
  return build_spm_model_proto(vocab, {}, vocab.add_space_prefix);
}

std::string build_spm_model_proto(const Vocab& vocab, const std::vector<bool>& as_control,
                                  bool dummy_prefix) {
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
  // SentencePiece allows one UNKNOWN piece and unique, non-empty texts; llama.cpp loads more
  // (converted models type padding entries UNKNOWN, some repeat a text).
  int32_t unk = -1;
  if (vocab.unk_id >= 0 && static_cast<size_t>(vocab.unk_id) < n &&
      vocab.types[static_cast<size_t>(vocab.unk_id)] == TokenType::unknown) {
    unk = vocab.unk_id;
  }
  for (size_t i = 0; i < n && unk < 0; ++i) {
    if (vocab.types[i] == TokenType::unknown) unk = static_cast<int32_t>(i);
  }
  // No piece typed UNKNOWN (SentencePiece needs one): the unk_id piece stands in.
  if (unk < 0 && vocab.unk_id >= 0 && static_cast<size_t>(vocab.unk_id) < n) unk = vocab.unk_id;
  std::unordered_set<std::string_view> seen;
  seen.reserve(n);
  std::string proto;
  bool has_bytes = false;
  std::string piece;
  for (size_t i = 0; i < n; ++i) {
    TokenType type = vocab.types[i];
    if (type == TokenType::unknown && static_cast<int32_t>(i) != unk) type = TokenType::control;
    if (static_cast<int32_t>(i) == unk) type = TokenType::unknown;
    if (!as_control.empty() && as_control[i] && type != TokenType::unknown) type = TokenType::control;
    std::string text = vocab.pieces[i];
    if (text.empty() || !seen.insert(vocab.pieces[i]).second) {
      // A text no input can hold whole: U+FFFF is a noncharacter, and CONTROL pieces are never
      // matched in text.
      text = "\xEF\xBF\xBFspecchat:" + std::to_string(i);
      type = TokenType::control;
    }
    piece.clear();
    put_bytes(piece, kPiecePiece, text);
    put_float(piece, kPieceScore, vocab.scores[i]);
    put_int32(piece, kPieceType, static_cast<int32_t>(type));
    put_bytes(proto, kModelPieces, piece);
    has_bytes = has_bytes || type == TokenType::byte;
  }

  // Llama's tokenizer.model is a BPE model whose scores order the merges; SentencePiece's BPE
  // encoder merges the pair whose merged piece has the highest score, as the original does.
  std::string trainer;
  put_int32(trainer, kTrainerModelType, static_cast<int32_t>(kModelTypeBpe));
  put_int32(trainer, kTrainerVocabSize, vocab.size());
  put_bool(trainer, kTrainerByteFallback, has_bytes);
  put_int32(trainer, kTrainerUnkId, unk);
  put_int32(trainer, kTrainerBosId, vocab.bos_id);
  put_int32(trainer, kTrainerEosId, vocab.eos_id);
  put_int32(trainer, kTrainerPadId, -1);
  put_bytes(proto, kModelTrainerSpec, trainer);

  // "identity": no precompiled character map, so text is not normalised; whitespace is kept
  // as is (Llama: no collapsing of runs of spaces, B15) and escaped to U+2581.
  std::string norm;
  put_bytes(norm, kNormName, "identity");
  put_bool(norm, kNormAddDummyPrefix, dummy_prefix);
  put_bool(norm, kNormRemoveExtraWhitespaces, false);
  put_bool(norm, kNormEscapeWhitespaces, true);
  put_bytes(proto, kModelNormalizerSpec, norm);
  return proto;
}

}  // namespace specchat

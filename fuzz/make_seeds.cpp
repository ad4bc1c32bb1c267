// Writes the fuzzer's seed corpus (fuzz/corpus/): small valid GGUF files that reach deep into
// the loader (a complete tiny llama model with a SentencePiece vocabulary, in F32, F16 and Q8_0,
// and with random Q4_0, Q4_K, Q5_K and Q6_K blocks;
// a vocabulary-only file, SentencePiece and byte-level BPE; a file with every metadata value type). The corpus is committed;
// rerun this after a loader change that new seeds should cover:
//   build-fuzz/fuzz/fuzz_make_seeds fuzz/corpus
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tests/engine/gguf_writer.h"

namespace {

using specchat::test::GgufBuilder;

// <unk> <s> </s>, 256 byte pieces, then a few words: 270 pieces.
void add_vocab(GgufBuilder& b) {
  std::vector<std::string> pieces{"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types{2, 3, 3};
  char buf[8];
  for (int i = 0; i < 256; ++i) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", i);
    pieces.push_back(buf);
    types.push_back(6);
  }
  for (const char* w : {"\xE2\x96\x81", "\xE2\x96\x81" "O", "nce", "\xE2\x96\x81" "up", "on", "\xE2\x96\x81" "a",
                        "\xE2\x96\x81" "time", "<|end|>", "t", "i", "m"}) {
    pieces.push_back(w);
    types.push_back(std::string(w) == "<|end|>" ? 3 : 1);
  }
  std::vector<float> scores(pieces.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  b.set_string("tokenizer.ggml.model", "llama")
      .set_string_array("tokenizer.ggml.tokens", pieces)
      .set_f32_array("tokenizer.ggml.scores", scores)
      .set_i32_array("tokenizer.ggml.token_type", types)
      .set_u32("tokenizer.ggml.bos_token_id", 1)
      .set_u32("tokenizer.ggml.eos_token_id", 2)
      .set_u32("tokenizer.ggml.unknown_token_id", 0)
      .set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(pieces.size() - 4))
      .set_bool("tokenizer.ggml.add_bos_token", true)
      .set_string("tokenizer.chat_template", "specchat");
}

enum class Kind { f32, f16, q8_0 };

// UTF-8 of one code point (< 0x800 suffices for GPT-2's byte alphabet).
std::string utf8(unsigned cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// A byte-level BPE vocabulary (tokenizer.ggml.model gpt2, pre-tokenizer qwen2): the 256 byte
// symbols in GPT-2's byte-to-unicode alphabet, a few merges, and two control tokens.
void add_bpe_vocab(GgufBuilder& b) {
  std::vector<std::string> pieces;
  unsigned extra = 0;
  for (unsigned byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
    pieces.push_back(utf8(printable ? byte : 256 + extra++));
  }
  const std::string G = utf8(256 + 32);  // the space byte's symbol ("Ġ")
  const std::vector<std::string> merges{G + " t", "h e", G + " a", "o n", G + "t he"};
  for (const std::string& m : merges) {
    std::string joined = m;
    joined.erase(joined.find(' '), 1);
    pieces.push_back(joined);
  }
  std::vector<int32_t> types(pieces.size(), 1);
  pieces.push_back("<|endoftext|>");
  types.push_back(3);
  pieces.push_back("<|im_end|>");
  types.push_back(3);
  b.set_string("tokenizer.ggml.model", "gpt2")
      .set_string("tokenizer.ggml.pre", "qwen2")
      .set_string_array("tokenizer.ggml.tokens", pieces)
      .set_i32_array("tokenizer.ggml.token_type", types)
      .set_string_array("tokenizer.ggml.merges", merges)
      .set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(pieces.size() - 2))
      .set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(pieces.size() - 1))
      .set_bool("tokenizer.ggml.add_bos_token", false)
      .set_string("tokenizer.chat_template",
                  "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}");
}

// A 40-piece vocabulary without byte pieces (SentencePiece falls back to <unk>), small enough
// that a model with 256-wide rows (the k-quants' block size) stays a small seed.
void add_small_vocab(GgufBuilder& b, size_t n) {
  std::vector<std::string> pieces{"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types{2, 3, 3};
  while (pieces.size() < n) {
    pieces.push_back("\xE2\x96\x81" + std::string(1, static_cast<char>('a' + pieces.size() % 26)) +
                     std::to_string(pieces.size()));
    types.push_back(1);
  }
  std::vector<float> scores(pieces.size(), -1.0f);
  b.set_string("tokenizer.ggml.model", "llama")
      .set_string_array("tokenizer.ggml.tokens", pieces)
      .set_f32_array("tokenizer.ggml.scores", scores)
      .set_i32_array("tokenizer.ggml.token_type", types);
}

// A tiny llama whose matrices have one block type (ggml ids: q4_0 2, q8_0 8, q4_K 12, q5_K 13,
// q6_K 14), filled with random bytes (scales may be any f16, inf and nan included: the loader
// and kernels must take them), 256-wide rows.
GgufBuilder tiny_llama_blocks(uint32_t ggml_type, uint64_t block_bytes, uint64_t block_size) {
  const uint64_t d = 256, ff = 256, nv = 40, hd = 64, nh = 4, nkv = 2;
  GgufBuilder b;
  b.set_string("general.architecture", "llama")
      .set_u32("llama.context_length", 32)
      .set_u32("llama.embedding_length", d)
      .set_u32("llama.block_count", 1)
      .set_u32("llama.feed_forward_length", ff)
      .set_u32("llama.attention.head_count", nh)
      .set_u32("llama.attention.head_count_kv", nkv)
      .set_u32("llama.rope.dimension_count", hd)
      .set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  add_small_vocab(b, nv);
  std::mt19937 gen(ggml_type);
  auto mat = [&](const std::string& name, uint64_t n_in, uint64_t n_out) {
    std::vector<uint8_t> bytes(n_in / block_size * block_bytes * n_out);
    for (uint8_t& x : bytes) x = static_cast<uint8_t>(gen());
    b.add_tensor_raw(name, {n_in, n_out}, ggml_type, std::move(bytes));
  };
  std::vector<float> ones(d, 1.0f);
  mat("token_embd.weight", d, nv);
  b.add_tensor_f32("output_norm.weight", {d}, ones);
  mat("output.weight", d, nv);
  b.add_tensor_f32("blk.0.attn_norm.weight", {d}, ones);
  mat("blk.0.attn_q.weight", d, nh * hd);
  mat("blk.0.attn_k.weight", d, nkv * hd);
  mat("blk.0.attn_v.weight", d, nkv * hd);
  mat("blk.0.attn_output.weight", nh * hd, d);
  b.add_tensor_f32("blk.0.ffn_norm.weight", {d}, ones);
  mat("blk.0.ffn_gate.weight", d, ff);
  mat("blk.0.ffn_up.weight", d, ff);
  mat("blk.0.ffn_down.weight", ff, d);
  return b;
}

std::vector<float> values(size_t n, std::mt19937& gen, float mean) {
  std::normal_distribution<float> d(mean, 0.05f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

GgufBuilder tiny_llama(Kind kind) {
  const uint64_t d = 16, ff = 32, nv = 270, nl = 1, hd = 8, nh = 2, nkv = 1;
  GgufBuilder b;
  b.set_string("general.architecture", "llama")
      .set_u32("llama.context_length", 64)
      .set_u32("llama.embedding_length", d)
      .set_u32("llama.block_count", nl)
      .set_u32("llama.feed_forward_length", ff)
      .set_u32("llama.attention.head_count", nh)
      .set_u32("llama.attention.head_count_kv", nkv)
      .set_u32("llama.rope.dimension_count", hd)
      .set_f32("llama.rope.freq_base", 10000.0f)
      .set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .set_u32("llama.vocab_size", nv);
  add_vocab(b);
  std::mt19937 gen(7);
  auto mat = [&](const std::string& name, uint64_t n_in, uint64_t n_out) {
    const std::vector<float> v = values(n_in * n_out, gen, 0.0f);
    if (kind == Kind::f32) b.add_tensor_f32(name, {n_in, n_out}, v);
    else if (kind == Kind::f16) b.add_tensor_f16(name, {n_in, n_out}, v);
    else b.add_tensor_q8_0(name, {n_in, n_out}, v);
  };
  auto norm = [&](const std::string& name) { b.add_tensor_f32(name, {d}, values(d, gen, 1.0f)); };
  mat("token_embd.weight", d, nv);
  norm("output_norm.weight");
  mat("output.weight", d, nv);
  for (uint64_t l = 0; l < nl; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight");
    mat(p + "attn_q.weight", d, nh * hd);
    mat(p + "attn_k.weight", d, nkv * hd);
    mat(p + "attn_v.weight", d, nkv * hd);
    mat(p + "attn_output.weight", nh * hd, d);
    norm(p + "ffn_norm.weight");
    mat(p + "ffn_gate.weight", d, ff);
    mat(p + "ffn_up.weight", d, ff);
    mat(p + "ffn_down.weight", ff, d);
  }
  return b;
}

GgufBuilder every_value_type() {
  GgufBuilder b;
  b.set_u8("t.u8", 1).set_i8("t.i8", -1).set_u16("t.u16", 2).set_i16("t.i16", -2)
      .set_u32("t.u32", 3).set_i32("t.i32", -3).set_u64("t.u64", 4).set_i64("t.i64", -4)
      .set_f32("t.f32", 0.5f).set_f64("t.f64", 0.25).set_bool("t.bool", true)
      .set_string("t.str", "x").set_string_array("t.arr", {"a", "b"})
      .set_f32_array("t.farr", {1.0f, 2.0f}).set_i32_array("t.iarr", {1, 2});
  b.add_tensor_f32("t.tensor", {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  tiny_llama(Kind::f32).write_file(dir + "/llama-f32.gguf");
  tiny_llama(Kind::f16).write_file(dir + "/llama-f16.gguf");
  tiny_llama(Kind::q8_0).write_file(dir + "/llama-q8_0.gguf");
  GgufBuilder vocab_only;
  vocab_only.set_string("general.architecture", "llama");
  add_vocab(vocab_only);
  vocab_only.write_file(dir + "/vocab-only.gguf");
  every_value_type().write_file(dir + "/value-types.gguf");
  GgufBuilder bpe_only;
  bpe_only.set_string("general.architecture", "qwen2");
  add_bpe_vocab(bpe_only);
  bpe_only.write_file(dir + "/vocab-bpe-qwen2.gguf");
  tiny_llama_blocks(2, 18, 32).write_file(dir + "/llama-q4_0-random.gguf");
  tiny_llama_blocks(12, 144, 256).write_file(dir + "/llama-q4_k-random.gguf");
  tiny_llama_blocks(13, 176, 256).write_file(dir + "/llama-q5_k-random.gguf");
  tiny_llama_blocks(14, 210, 256).write_file(dir + "/llama-q6_k-random.gguf");
  return 0;
}

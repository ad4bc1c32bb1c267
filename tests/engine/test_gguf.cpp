// GGUF reader tests: metadata round trips, typed getters, tensors, dequantization, and a typed
// error (never a crash or an out-of-range read) for every malformed input of FAULT-KINDS B19.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "engine/gguf.h"
#include "gguf_outcome.h"
#include "gguf_writer.h"
#include "test_paths.h"

using namespace specchat;
using specchat::test::GgufBuilder;
using specchat::test::GgufLayout;
using specchat::test::same_value;
namespace gv = specchat::test::gguf_value;
namespace fs = std::filesystem;

namespace {

using Outcome = specchat::test::GgufOutcome;
constexpr auto outcome_of = [](auto&& f) { return specchat::test::gguf_outcome_of(f); };

constexpr const char* kLabel = "test.gguf";

Outcome parse(std::vector<uint8_t> bytes) {
  return outcome_of([&] { GgufFile::from_bytes(std::move(bytes), kLabel); });
}

bool starts_with(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  const int shift = static_cast<int>(n / 3);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i) - shift);
  return v;
}

// A small valid file: scalars, arrays and three tensors of different types.
GgufBuilder small_builder() {
  GgufBuilder b;
  b.set_string("general.architecture", "llama");
  b.set_u32("llama.block_count", 2);
  b.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  b.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "hello", "world"});
  b.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
  b.add_tensor_f32("a.weight", {4, 2}, ramp(8, 0.5f));
  b.add_tensor_f16("b.weight", {8}, ramp(8, 0.25f));
  b.add_tensor_q8_0("c.weight", {32, 2}, ramp(64, 0.1f));
  return b;
}

void check_same_file(const GgufFile& a, const GgufFile& b) {
  REQUIRE(a.metadata().size() == b.metadata().size());
  for (const auto& [k, v] : a.metadata()) {
    INFO(k);
    REQUIRE(b.find(k));
    CHECK(same_value(v, *b.find(k)));
  }
  REQUIRE(a.tensors().size() == b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const auto& x = a.tensors()[i];
    const auto& y = b.tensors()[i];
    CHECK(x.name == y.name);
    CHECK(x.ne == y.ne);
    CHECK(x.type == y.type);
    REQUIRE(x.n_bytes == y.n_bytes);
    CHECK(std::memcmp(x.data, y.data, x.n_bytes) == 0);
  }
}

std::vector<float> dequant(const GgufTensorInfo& t) {
  std::vector<float> out(t.n_elements());
  dequantize_to_f32(t.type, t.data, out.data(), out.size());
  return out;
}

// Scratch directory removed at the end of the test case.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("specchat_gguf_" + std::to_string(::getpid()) +
                                               "_" + std::to_string(counter()++));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { std::error_code ec; fs::remove_all(path, ec); }
  static int& counter() { static int n = 0; return n; }
};

void put_u64(std::vector<uint8_t>& bytes, uint64_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

TEST_CASE("gguf: error kind and ggml type names are stable", "[unit]") {
  CHECK(std::string(gguf_error_kind_name(GgufErrorKind::io)) == "io");
  CHECK(std::string(gguf_error_kind_name(GgufErrorKind::bad_magic)) == "bad_magic");
  CHECK(std::string(gguf_error_kind_name(GgufErrorKind::unsupported_version)) ==
        "unsupported_version");
  CHECK(std::string(gguf_error_kind_name(GgufErrorKind::truncated)) == "truncated");
  CHECK(std::string(gguf_error_kind_name(GgufErrorKind::data_past_end)) == "data_past_end");
  CHECK(std::string(gguf_error_kind_name(GgufErrorKind::absurd_value)) == "absurd_value");
  CHECK(std::string(gguf_error_kind_name(GgufErrorKind::unknown_type)) == "unknown_type");
  CHECK(std::string(gguf_error_kind_name(GgufErrorKind::missing_key)) == "missing_key");
  CHECK(std::string(gguf_error_kind_name(GgufErrorKind::wrong_type)) == "wrong_type");
  CHECK(std::string(ggml_type_name(GgmlType::f32)) == "f32");
  CHECK(std::string(ggml_type_name(GgmlType::f16)) == "f16");
  CHECK(std::string(ggml_type_name(GgmlType::q8_0)) == "q8_0");
  CHECK(std::string(ggml_type_name(GgmlType::bf16)) == "bf16");
}

TEST_CASE("gguf: tensors keep shape, type, size and aligned data", "[unit]") {
  GgufLayout lay;
  GgufBuilder b = small_builder();
  b.add_tensor_bf16("d.weight", {3}, {1.0f, -2.5f, 0.0f});
  const std::vector<uint8_t> bytes = b.build(&lay);
  const GgufFile f = GgufFile::from_bytes(bytes, kLabel);
  CHECK(f.file_size() == bytes.size());
  CHECK(f.alignment() == 32);
  REQUIRE(f.tensors().size() == 4);
  const std::vector<std::string> names{"a.weight", "b.weight", "c.weight", "d.weight"};
  const std::vector<uint64_t> sizes{32, 16, 68, 6};
  for (size_t i = 0; i < 4; ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    CHECK(t.name == names[i]);
    CHECK(t.n_bytes == sizes[i]);
    CHECK(t.offset % 32 == 0);
    CHECK(lay.data_start % 32 == 0);
    CHECK(lay.data_start + t.offset == lay.tensor_data_start[i]);
    CHECK(f.tensor(names[i]) == &t);
  }
  const GgufTensorInfo& a = f.require_tensor("a.weight", {4, 2});
  CHECK(a.type == GgmlType::f32);
  CHECK(a.n_elements() == 8);
  CHECK(dequant(a) == ramp(8, 0.5f));
  CHECK(dequant(*f.tensor("b.weight")) == ramp(8, 0.25f));  // multiples of 1/4 are exact in f16
  CHECK(f.tensor("c.weight")->type == GgmlType::q8_0);
  CHECK(dequant(*f.tensor("d.weight")) == std::vector<float>{1.0f, -2.5f, 0.0f});
  CHECK(f.tensor("nope") == nullptr);
  const Outcome shape = outcome_of([&] { (void)f.require_tensor("a.weight", {2, 4}); });
  CHECK(shape.kind == "wrong_type");
  CHECK(contains(shape.message, "[4, 2]"));
  CHECK(outcome_of([&] { (void)f.require_tensor("nope"); }).kind == "missing_key");

  GgufFile moved = GgufFile::from_bytes(bytes, kLabel);
  GgufFile target = std::move(moved);  // the owned buffer moves with the file
  CHECK(dequant(target.require_tensor("a.weight")) == ramp(8, 0.5f));
}

TEST_CASE("gguf: alignment and tensor offsets", "[unit]") {
  SECTION("general.alignment 64 is honoured") {
    GgufBuilder b = small_builder();
    b.set_alignment(64);
    const GgufFile f = GgufFile::from_bytes(b.build(), kLabel);
    CHECK(f.alignment() == 64);
    for (const auto& t : f.tensors()) CHECK(t.offset % 64 == 0);
    CHECK(dequant(f.require_tensor("a.weight")) == ramp(8, 0.5f));
  }
  SECTION("alignment not a power of two") {
    for (uint32_t a : {0u, 3u, 48u}) {
      GgufBuilder b = small_builder();
      b.set_u32("general.alignment", a);
      const Outcome o = parse(b.build());
      CHECK(o.kind == "absurd_value");
      CHECK(contains(o.message, "general.alignment"));
    }
  }
  SECTION("alignment of the wrong type") {
    GgufBuilder b = small_builder();
    b.set_string("general.alignment", "32");
    CHECK(parse(b.build()).kind == "wrong_type");
  }
  SECTION("misaligned tensor offset") {
    GgufBuilder b = small_builder();
    b.set_tensor_offset("b.weight", 33);
    const Outcome o = parse(b.build());
    CHECK(o.kind == "absurd_value");
    CHECK(contains(o.message, "b.weight"));
  }
  SECTION("offsets far past the end") {
    for (uint64_t off : {uint64_t{1} << 20, std::numeric_limits<uint64_t>::max() - 31}) {
      GgufBuilder b = small_builder();
      b.set_tensor_offset("b.weight", off);
      const Outcome o = parse(b.build());
      CHECK(o.kind == "data_past_end");
      CHECK(contains(o.message, "'b.weight'"));
    }
  }
}

TEST_CASE("gguf: open() maps files and reports io errors with the path", "[unit]") {
  TempDir dir;
  const std::string path = (dir.path / "small.gguf").string();
  small_builder().write_file(path);
  const GgufFile f = GgufFile::open(path);
  CHECK(f.path() == path);
  CHECK(f.file_size() == fs::file_size(path));
  CHECK(dequant(f.require_tensor("a.weight")) == ramp(8, 0.5f));
  check_same_file(f, GgufFile::from_bytes(small_builder().build(), kLabel));

  const std::string missing = (dir.path / "missing.gguf").string();
  const Outcome o = outcome_of([&] { GgufFile::open(missing); });
  CHECK(o.kind == "io");
  CHECK(starts_with(o.message, missing + ": "));
  CHECK(outcome_of([&] { GgufFile::open(dir.path.string()); }).kind == "io");

  const std::string empty = (dir.path / "empty.gguf").string();
  GgufBuilder::write_bytes(empty, {});
  const Outcome e = outcome_of([&] { GgufFile::open(empty); });
  CHECK(e.kind == "truncated");
  CHECK(starts_with(e.message, empty + ": "));
}

TEST_CASE("gguf: bad magic and unsupported versions", "[unit]") {
  for (const char* magic : {"GGML", "ggjt", "FUGG", "\0\0\0\0"}) {
    GgufBuilder b = small_builder();
    b.set_magic(std::string(magic, 4));
    const Outcome o = parse(b.build());
    CHECK(o.kind == "bad_magic");
    CHECK(starts_with(o.message, std::string(kLabel) + ": "));
  }
  CHECK(parse({'X', 'Y'}).kind == "bad_magic");
  CHECK(parse({'G', 'G'}).kind == "truncated");
  CHECK(parse({}).kind == "truncated");
  for (uint32_t v : {0u, 1u, 4u, 99u}) {
    GgufBuilder b = small_builder();
    b.set_version(v);
    const Outcome o = parse(b.build());
    CHECK(o.kind == "unsupported_version");
    CHECK(contains(o.message, std::to_string(v)));
  }
  GgufBuilder be = small_builder();
  be.set_version(0x03000000u);
  CHECK(contains(parse(be.build()).message, "big-endian"));
  GgufBuilder v2 = small_builder();
  v2.set_version(2);
  CHECK(GgufFile::from_bytes(v2.build(), kLabel).version() == 2);
}

TEST_CASE("gguf: every truncation of a small file is a typed error", "[unit]") {
  const std::vector<uint8_t> bytes = small_builder().build();
  REQUIRE(parse(bytes).kind == "ok");
  for (size_t n = 0; n < bytes.size(); ++n) {
    const Outcome o = parse(GgufBuilder::truncated(bytes, n));
    INFO("cut at " << n << " of " << bytes.size() << ": " << o.message);
    CHECK((o.kind == "truncated" || o.kind == "data_past_end" || o.kind == "absurd_value"));
    CHECK(starts_with(o.message, std::string(kLabel) + ": "));
  }
}

TEST_CASE("gguf: truncation at the places FAULT-KINDS B19 names", "[unit]") {
  GgufLayout lay;
  const std::vector<uint8_t> bytes = small_builder().build(&lay);
  const uint64_t full = bytes.size();
  SECTION("inside the header") {
    for (size_t n : {4, 7, 10, 20, 23}) {
      CHECK(parse(GgufBuilder::truncated(bytes, n)).kind == "truncated");
    }
  }
  SECTION("inside a metadata array") {
    const uint64_t tokens = lay.kv_value_start[3];  // tokenizer.ggml.tokens
    for (uint64_t n = tokens; n < lay.kv_start[4]; ++n) {
      const Outcome o = parse(GgufBuilder::truncated(bytes, n));
      CHECK(o.kind == "truncated");
      CHECK(contains(o.message, "tokenizer.ggml.tokens"));
    }
  }
  SECTION("inside the tensor-info table") {
    const Outcome o = parse(GgufBuilder::truncated(bytes, lay.tensor_info_start_of[1] + 3));
    CHECK(o.kind == "truncated");
  }
  SECTION("exactly at the start of tensor data") {
    const Outcome o = parse(GgufBuilder::truncated(bytes, lay.data_start));
    CHECK(o.kind == "data_past_end");
    CHECK(contains(o.message, "'a.weight'"));
    CHECK(contains(o.message, "expected file size " + std::to_string(full)));
    CHECK(contains(o.message, "actual " + std::to_string(lay.data_start)));
  }
  SECTION("inside the second tensor: the first tensor past the end is named") {
    const Outcome o = parse(GgufBuilder::truncated(bytes, lay.tensor_data_start[1] + 1));
    CHECK(o.kind == "data_past_end");
    CHECK(contains(o.message, "'b.weight'"));
    CHECK_FALSE(contains(o.message, "c.weight"));
  }
  SECTION("one byte short") {
    const Outcome o = parse(GgufBuilder::truncated(bytes, full - 1));
    CHECK(o.kind == "data_past_end");
    CHECK(contains(o.message, "'c.weight'"));
    CHECK(contains(o.message, "expected file size " + std::to_string(full) + " bytes"));
    CHECK(contains(o.message, "actual " + std::to_string(full - 1) + " bytes"));
  }
  SECTION("nine tenths of the file, from disk") {
    TempDir dir;
    const std::string path = (dir.path / "cut.gguf").string();
    GgufBuilder::write_bytes(path, GgufBuilder::truncated(bytes, full * 9 / 10));
    const Outcome o = outcome_of([&] { GgufFile::open(path); });
    CHECK(o.kind == "data_past_end");
    CHECK(starts_with(o.message, path + ": tensor 'c.weight'"));
  }
}

TEST_CASE("gguf: absurd counts, lengths and dims", "[unit]") {
  auto with_tensor = [](std::vector<uint64_t> ne, uint32_t type = 0, size_t n_bytes = 4) {
    GgufBuilder b = small_builder();
    b.add_tensor_raw("bad", std::move(ne), type, std::vector<uint8_t>(n_bytes));
    return parse(b.build());
  };
  const uint64_t big = uint64_t{1} << 40;
  CHECK(with_tensor({1, 1, 1, 1, 1}).kind == "absurd_value");   // n_dims 5
  CHECK(with_tensor({4, 0}).kind == "absurd_value");            // a dim 0
  CHECK(with_tensor({big + 1}).kind == "absurd_value");         // a dim > 2^40
  CHECK(with_tensor({big, big}).kind == "absurd_value");        // element count overflows u64
  CHECK(with_tensor({big, uint64_t{1} << 21}).kind == "absurd_value");  // 2^61 elements
  CHECK(with_tensor({48}, 8, 68).kind == "absurd_value");       // q8_0 row not a multiple of 32
  CHECK(contains(with_tensor({4, 0}).message, "'bad'"));
  CHECK(with_tensor({big}).kind == "data_past_end");            // plausible shape, no data
  CHECK(with_tensor({1}, 0, 4).kind == "ok");

  GgufLayout lay;
  const std::vector<uint8_t> bytes = small_builder().build(&lay);
  auto patched = [&](uint64_t at, uint64_t v) {
    std::vector<uint8_t> copy = bytes;
    put_u64(copy, at, v);
    return parse(std::move(copy));
  };
  CHECK(parse(small_builder().override_kv_count(uint64_t{1} << 40).build()).kind ==
        "absurd_value");
  CHECK(parse(small_builder().override_tensor_count(~uint64_t{0}).build()).kind ==
        "absurd_value");
  CHECK(patched(8, uint64_t{1} << 40).kind == "absurd_value");    // tensor_count
  CHECK(patched(16, uint64_t{1} << 62).kind == "absurd_value");   // kv_count
  CHECK(patched(16, bytes.size() / 13 + 1).kind == "absurd_value");
  CHECK(patched(lay.kv_start[1], bytes.size() + 1).kind == "absurd_value");  // key length
  CHECK(patched(lay.kv_start[1], std::numeric_limits<uint64_t>::max()).kind == "absurd_value");
  CHECK(patched(lay.kv_value_start[0], bytes.size() * 2).kind == "absurd_value");  // string value
  CHECK(patched(lay.tensor_info_start_of[0], bytes.size() + 7).kind == "absurd_value");  // name
  CHECK(patched(lay.kv_value_start[3] + 4, uint64_t{1} << 62).kind == "absurd_value");  // array
  CHECK(patched(lay.kv_value_start[3] + 4, bytes.size() / 8 + 1).kind == "absurd_value");

  std::vector<uint8_t> u8_array_payload;
  GgufBuilder::push_u32(u8_array_payload, 0);
  GgufBuilder::push_u64(u8_array_payload, (uint64_t{1} << 24) + 1);  // over the element cap
  u8_array_payload.resize(u8_array_payload.size() + (size_t{1} << 24) + 1, 0);
  GgufBuilder huge;
  huge.append_raw("huge", 9, std::move(u8_array_payload));
  CHECK(parse(huge.build()).kind == "absurd_value");

  std::vector<uint8_t> deep;  // arrays nested 20 deep
  for (int i = 0; i < 20; ++i) {
    GgufBuilder::push_u32(deep, 9);
    GgufBuilder::push_u64(deep, 1);
  }
  GgufBuilder::push_u32(deep, 0);
  GgufBuilder::push_u64(deep, 0);
  GgufBuilder nested;
  nested.append_raw("deep", 9, std::move(deep));
  CHECK(parse(nested.build()).kind == "absurd_value");

  GgufBuilder dup_key = small_builder();
  dup_key.append("llama.block_count", gv::uint(GgufType::u32, 3));
  const Outcome dk = parse(dup_key.build());
  CHECK(dk.kind == "absurd_value");
  CHECK(contains(dk.message, "llama.block_count"));
  GgufBuilder dup_tensor = small_builder();
  dup_tensor.add_tensor_f32("a.weight", {1}, {1.0f});
  const Outcome dt = parse(dup_tensor.build());
  CHECK(dt.kind == "absurd_value");
  CHECK(contains(dt.message, "a.weight"));
}

TEST_CASE("gguf: unknown metadata and tensor types", "[unit]") {
  for (uint32_t t : {13u, 999u, 0xffffffffu}) {
    GgufBuilder b = small_builder();
    b.append_raw("weird", t, {0, 0, 0, 0});
    const Outcome o = parse(b.build());
    CHECK(o.kind == "unknown_type");
    CHECK(contains(o.message, "weird"));
  }
  std::vector<uint8_t> payload;
  GgufBuilder::push_u32(payload, 13);
  GgufBuilder::push_u64(payload, 1);
  GgufBuilder arr = small_builder();
  arr.append_raw("weird_array", 9, std::move(payload));
  CHECK(parse(arr.build()).kind == "unknown_type");
  // q4_1, q5_0 and ids ggml never had: refused, naming the tensor.
  for (uint32_t t : {3u, 6u, 29u, 99u}) {
    GgufBuilder b = small_builder();
    b.add_tensor_raw("q", {32}, t, std::vector<uint8_t>(64));
    const Outcome o = parse(b.build());
    CHECK(o.kind == "unknown_type");
    CHECK(contains(o.message, "'q'"));
  }
  // Every block type of the vocabulary loads (q4_0: 32 values in 18 bytes; q4_K: 256 in 144) ...
  GgufBuilder q4 = small_builder();
  q4.add_tensor_raw("q", {32}, 2, std::vector<uint8_t>(18)).add_tensor_raw("k", {256, 2}, 12, std::vector<uint8_t>(288));
  const GgufFile f = GgufFile::from_bytes(q4.build(), kLabel);
  CHECK(f.require_tensor("q").type == DType::q4_0);
  CHECK(f.require_tensor("q").n_bytes == 18);
  CHECK(f.require_tensor("k").type == DType::q4_k);
  CHECK(f.require_tensor("k").n_bytes == 288);
  // ... but a row that is not whole super-blocks is refused.
  GgufBuilder bad = small_builder();
  bad.add_tensor_raw("k", {32}, 12, std::vector<uint8_t>(144));
  const Outcome o = parse(bad.build());
  CHECK(o.kind == "absurd_value");
  CHECK(contains(o.message, "256"));
}

TEST_CASE("gguf: randomly corrupted files give typed errors, never bad reads", "[unit]") {
  GgufLayout lay;
  const std::vector<uint8_t> bytes = small_builder().build(&lay);
  std::mt19937_64 rng(42);
  size_t ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> copy = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly in the header, metadata and tensor table, where the counts and lengths are.
      const size_t limit = rng() % 4 ? lay.data_start : copy.size();
      copy[rng() % limit] = static_cast<uint8_t>(rng());
    }
    INFO("iteration " << iter);
    try {
      const GgufFile f = GgufFile::from_bytes(std::move(copy), kLabel);
      for (const auto& t : f.tensors()) (void)dequant(t);  // reads every tensor byte
      ++ok;
    } catch (const GgufError& e) {
      CHECK(starts_with(e.what(), std::string(kLabel) + ": "));
    }
  }
  CHECK(ok > 0);  // some flips land in data or strings and still parse
}

TEST_CASE("gguf: GgufBuilder::from_file copies a file so tests can mutate it", "[unit]") {
  const GgufFile original = GgufFile::from_bytes(small_builder().set_alignment(64).build(), kLabel);
  const GgufFile copy = GgufFile::from_bytes(GgufBuilder::from_file(original).build(), kLabel);
  check_same_file(original, copy);
  CHECK(copy.alignment() == 64);

  GgufBuilder mutated = GgufBuilder::from_file(original);
  mutated.set_u32("llama.block_count", 5).remove("tokenizer.ggml.token_type");
  mutated.remove_tensor("b.weight");
  mutated.tensor("a.weight").ne = {8};
  const GgufFile m = GgufFile::from_bytes(mutated.build(), kLabel);
  CHECK(m.get_u32("llama.block_count") == 5);
  CHECK_FALSE(m.has("tokenizer.ggml.token_type"));
  CHECK(m.tensor("b.weight") == nullptr);
  CHECK(m.require_tensor("a.weight", {8}).n_bytes == 32);
  CHECK(dequant(m.require_tensor("c.weight")) == dequant(original.require_tensor("c.weight")));
}

TEST_CASE("gguf: the llama-spm conformance vocabulary file parses", "[unit]") {
  const std::string path = test::test_data("tokenizer/ggml-vocab-llama-spm.gguf");
  INFO("conformance data missing: " << path);
  REQUIRE(fs::exists(path));
  const GgufFile f = GgufFile::open(path);
  CHECK(f.version() == 3);
  CHECK(f.tensors().empty());
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.get_string("tokenizer.ggml.model") == "llama");
  const std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
  REQUIRE(tokens.size() == 32000);
  CHECK(tokens[0] == "<unk>");
  CHECK(tokens[1] == "<s>");
  CHECK(tokens[2] == "</s>");
  CHECK(f.get_f32_array("tokenizer.ggml.scores").size() == 32000);
  CHECK(f.get_i32_array("tokenizer.ggml.token_type").size() == 32000);
  CHECK(f.get_u32("tokenizer.ggml.bos_token_id") == 1);
  CHECK(f.get_u32("llama.vocab_size") == 32000);

  const std::vector<uint8_t> rebuilt = GgufBuilder::from_file(f).build();
  check_same_file(f, GgufFile::from_bytes(rebuilt, "rebuilt"));
  const size_t size = rebuilt.size();
  for (size_t n : {size / 4, size / 2, size * 9 / 10, size - 1}) {
    const Outcome o = parse(GgufBuilder::truncated(rebuilt, n));
    INFO("cut at " << n << ": " << o.message);
    CHECK(o.kind == "truncated");
  }
}

TEST_CASE("gguf: the bundled target model parses", "[model]") {
  const std::string path = test::target_model();
  INFO("bundled model missing: " << path << " (it is part of the repository: resources/models)");
  REQUIRE(fs::exists(path));
  const GgufFile f = GgufFile::open(path);
  // GgufBuilder::from_file keeps everything (the path other tests take to mutate the model).
  check_same_file(f, GgufFile::from_bytes(GgufBuilder::from_file(f).build(), "rebuilt"));
  CHECK(f.get_string("general.architecture") == "llama");
  REQUIRE_FALSE(f.tensors().empty());
  uint64_t total = 0;
  for (const auto& t : f.tensors()) {
    INFO(t.name);
    CHECK(t.n_bytes > 0);
    CHECK(t.offset % f.alignment() == 0);
    total += t.n_bytes;
    const uint64_t n = std::min<uint64_t>(32, t.n_elements());  // q8_0: ne[0] % 32 == 0
    std::vector<float> head(n);
    dequantize_to_f32(t.type, t.data, head.data(), n);
    for (float x : head) CHECK(std::isfinite(x));
  }
  CHECK(total <= f.file_size());
  CHECK(f.tensor("token_embd.weight") != nullptr);

  TempDir dir;  // B19: the model with its tail cut off names a tensor, with both sizes
  const std::string cut = (dir.path / "cut.gguf").string();
  fs::copy_file(path, cut);
  fs::resize_file(cut, f.file_size() * 9 / 10);
  const Outcome o = outcome_of([&] { GgufFile::open(cut); });
  CHECK(o.kind == "data_past_end");
  CHECK(starts_with(o.message, cut + ": tensor '"));
  CHECK(contains(o.message, "actual " + std::to_string(f.file_size() * 9 / 10) + " bytes"));
}

TEST_CASE("gguf: release_pages changes residency only, never the bytes read back", "[model]") {
  const std::string path = test::target_model();
  INFO("bundled model missing: " << path << " (it is part of the repository: resources/models)");
  REQUIRE(fs::exists(path));
  const GgufFile f = GgufFile::open(path);
  std::vector<std::vector<uint8_t>> before;
  for (const auto& t : f.tensors()) before.emplace_back(t.data, t.data + t.n_bytes);
  for (const auto& t : f.tensors()) f.release_pages(t.data, t.n_bytes);
  f.release_pages(f.tensors().front().data, 0);                         // empty: nothing
  f.release_pages(before.front().data(), before.front().size());        // outside the mapping: nothing
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& t = f.tensors()[i];
    INFO(t.name);
    CHECK(std::equal(before[i].begin(), before[i].end(), t.data));
  }
  // A file held in memory (from_bytes) keeps its bytes too: nothing is released.
  const GgufFile m = GgufFile::from_bytes(GgufBuilder::from_file(f).build(), "copy");
  const auto& t0 = m.tensors().front();
  const std::vector<uint8_t> copy(t0.data, t0.data + t0.n_bytes);
  m.release_pages(t0.data, t0.n_bytes);
  CHECK(std::equal(copy.begin(), copy.end(), t0.data));
}

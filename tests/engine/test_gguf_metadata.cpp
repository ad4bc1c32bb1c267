// GGUF metadata (engine/gguf_metadata.cpp): every value type round-trips, and the typed getters
// convert what fits and refuse the rest with a typed error naming the key and what it found.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "engine/gguf.h"
#include "gguf_outcome.h"
#include "gguf_writer.h"

using namespace specchat;
using specchat::test::GgufBuilder;
namespace gv = specchat::test::gguf_value;

namespace {

using Outcome = specchat::test::GgufOutcome;
constexpr auto outcome_of = [](auto&& f) { return specchat::test::gguf_outcome_of(f); };

constexpr const char* kLabel = "test.gguf";

bool starts_with(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("gguf: every metadata type round-trips", "[unit]") {
  GgufBuilder b;
  b.set_u8("u8", 255).set_i8("i8", -128).set_u16("u16", 65535).set_i16("i16", -32768);
  b.set_u32("u32", 4294967295u).set_i32("i32", std::numeric_limits<int32_t>::min());
  b.set_u64("u64", std::numeric_limits<uint64_t>::max());
  b.set_i64("i64", std::numeric_limits<int64_t>::min());
  b.set_f32("f32", 0.1f).set_f64("f64", -1e300).set_bool("t", true).set_bool("f", false);
  b.set_string("s", "h\xC3\xA9llo").set_string("empty", "");
  b.set_string("nul", std::string("a\0b", 3));
  b.set_string_array("sa", {"x", "", "yz"}).set_f32_array("fa", {1.5f, -2.0f});
  b.set_i32_array("ia", {-1, 0, 7}).set_string_array("none", {});
  b.set("u8a", gv::array(GgufType::u8, {gv::uint(GgufType::u8, 1), gv::uint(GgufType::u8, 200)}));
  b.set("ba", gv::array(GgufType::boolean, {gv::boolean(true), gv::boolean(false)}));
  b.set("nested", gv::array(GgufType::array,
                            {gv::array(GgufType::u16, {gv::uint(GgufType::u16, 9)}),
                             gv::array(GgufType::string, {gv::string("deep")})}));
  b.set_u32("u32", 7);  // replaces, keeps one entry
  const GgufFile f = GgufFile::from_bytes(b.build(), kLabel);
  CHECK(f.version() == 3);
  CHECK(f.path() == kLabel);
  CHECK(f.metadata().size() == 22);
  CHECK(f.find("u8")->type == GgufType::u8);
  CHECK(std::get<uint64_t>(f.find("u8")->v) == 255);
  CHECK(std::get<int64_t>(f.find("i8")->v) == -128);
  CHECK(std::get<uint64_t>(f.find("u16")->v) == 65535);
  CHECK(std::get<int64_t>(f.find("i16")->v) == -32768);
  CHECK(f.get_u32("u32") == 7);
  CHECK(f.get_i64("i32") == std::numeric_limits<int32_t>::min());
  CHECK(std::get<uint64_t>(f.find("u64")->v) == std::numeric_limits<uint64_t>::max());
  CHECK(f.get_i64("i64") == std::numeric_limits<int64_t>::min());
  CHECK(f.get_f32("f32") == 0.1f);
  CHECK(std::get<double>(f.find("f64")->v) == -1e300);
  CHECK(f.get_bool("t"));
  CHECK_FALSE(f.get_bool("f"));
  CHECK(f.get_string("s") == "h\xC3\xA9llo");
  CHECK(f.get_string("empty").empty());
  CHECK(f.get_string("nul") == std::string("a\0b", 3));
  CHECK(f.get_string_array("sa") == std::vector<std::string>{"x", "", "yz"});
  CHECK(f.get_f32_array("fa") == std::vector<float>{1.5f, -2.0f});
  CHECK(f.get_i32_array("ia") == std::vector<int32_t>{-1, 0, 7});
  CHECK(f.get_string_array("none").empty());
  CHECK(f.get_i32_array("u8a") == std::vector<int32_t>{1, 200});
  CHECK(f.find("ba")->array_type == GgufType::boolean);
  const auto& nested = std::get<std::vector<GgufValue>>(f.find("nested")->v);
  REQUIRE(nested.size() == 2);
  CHECK(nested[0].array_type == GgufType::u16);
  CHECK(std::get<std::string>(std::get<std::vector<GgufValue>>(nested[1].v)[0].v) == "deep");
  CHECK(f.find("absent") == nullptr);
  CHECK_FALSE(f.has("absent"));
  CHECK(f.tensors().empty());
}

TEST_CASE("gguf: typed getters convert integers that fit and refuse the rest", "[unit]") {
  GgufBuilder b;
  b.set_u8("u8", 3).set_i8("neg", -1).set_u64("big", 5000000000ull).set_i64("i64", 42);
  b.set_u64("huge", std::numeric_limits<uint64_t>::max()).set_f64("f64", 2.5).set_u32("u32", 9);
  b.set_f64("too_big_for_f32", 1e300).set_string("s", "x").set_bool("b", true);
  const GgufFile f = GgufFile::from_bytes(b.build(), kLabel);
  CHECK(f.get_u32("u8") == 3);
  CHECK(f.get_u32("i64") == 42);
  CHECK(f.get_i64("neg") == -1);
  CHECK(f.get_i64("big") == 5000000000ll);
  CHECK(f.get_f32("u32") == 9.0f);
  CHECK(f.get_f32("neg") == -1.0f);
  CHECK(f.get_f32("f64") == 2.5f);
  CHECK(f.get_u32_or("absent", 11) == 11);
  CHECK(f.get_f32_or("absent", 0.5f) == 0.5f);
  CHECK(f.get_bool_or("absent", true));
  CHECK(f.get_string_or("absent", "fb") == "fb");
  CHECK(f.get_string_or("s", "fb") == "x");

  for (auto [key, getter] : std::vector<std::pair<std::string, int>>{
           {"neg", 0}, {"big", 0}, {"s", 0}, {"b", 0}, {"f64", 0}, {"huge", 1}, {"s", 1},
           {"too_big_for_f32", 2}, {"s", 2}, {"b", 2}, {"u32", 3}, {"s", 3}, {"u32", 4},
           {"s", 5}, {"u32", 6}, {"b", 7}}) {
    INFO(key << " getter " << getter);
    const std::string k = key;
    const int g = getter;
    const Outcome o = outcome_of([&] {
      switch (g) {
        case 0: (void)f.get_u32(k); break;
        case 1: (void)f.get_i64(k); break;
        case 2: (void)f.get_f32(k); break;
        case 3: (void)f.get_bool(k); break;
        case 4: (void)f.get_string(k); break;
        case 5: (void)f.get_u32_or(k, 1); break;
        case 6: (void)f.get_string_or(k, ""); break;
        case 7: (void)f.get_f32_or(k, 0); break;
      }
    });
    CHECK(o.kind == "wrong_type");
    CHECK(starts_with(o.message, kLabel));
    CHECK(contains(o.message, k));
  }
  const Outcome missing = outcome_of([&] { (void)f.get_u32("nope"); });
  CHECK(missing.kind == "missing_key");
  CHECK(starts_with(missing.message, std::string(kLabel) + ": "));
  CHECK(contains(missing.message, "nope"));
  CHECK(outcome_of([&] { (void)f.get_string("nope"); }).kind == "missing_key");
  CHECK(outcome_of([&] { (void)f.get_string_array("nope"); }).kind == "missing_key");
}

TEST_CASE("gguf: array getters check element types and ranges", "[unit]") {
  GgufBuilder b;
  b.set("u32s", gv::array(GgufType::u32, {gv::uint(GgufType::u32, 1),
                                          gv::uint(GgufType::u32, 2147483647)}));
  b.set("i64s", gv::array(GgufType::i64, {gv::sint(GgufType::i64, -5),
                                          gv::sint(GgufType::i64, 6)}));
  b.set("u32_big", gv::array(GgufType::u32, {gv::uint(GgufType::u32, 2147483648u)}));
  b.set("i64_small", gv::array(GgufType::i64, {gv::sint(GgufType::i64, -2147483649ll)}));
  b.set("f64s", gv::array(GgufType::f64, {gv::f64(0.25)}));
  b.set_i32_array("i32s", {4, -4}).set_string_array("strs", {"a"}).set_u32("scalar", 1);
  const GgufFile f = GgufFile::from_bytes(b.build(), kLabel);
  CHECK(f.get_i32_array("u32s") == std::vector<int32_t>{1, 2147483647});
  CHECK(f.get_i32_array("i64s") == std::vector<int32_t>{-5, 6});
  CHECK(f.get_f32_array("f64s") == std::vector<float>{0.25f});
  CHECK(f.get_f32_array("i32s") == std::vector<float>{4.0f, -4.0f});
  CHECK(outcome_of([&] { (void)f.get_i32_array("u32_big"); }).kind == "wrong_type");
  CHECK(outcome_of([&] { (void)f.get_i32_array("i64_small"); }).kind == "wrong_type");
  CHECK(outcome_of([&] { (void)f.get_i32_array("f64s"); }).kind == "wrong_type");
  CHECK(outcome_of([&] { (void)f.get_i32_array("strs"); }).kind == "wrong_type");
  CHECK(outcome_of([&] { (void)f.get_i32_array("scalar"); }).kind == "wrong_type");
  CHECK(outcome_of([&] { (void)f.get_f32_array("strs"); }).kind == "wrong_type");
  CHECK(outcome_of([&] { (void)f.get_string_array("i32s"); }).kind == "wrong_type");
  CHECK(outcome_of([&] { (void)f.get_string_array("scalar"); }).kind == "wrong_type");
  CHECK(outcome_of([&] { (void)f.get_string("strs"); }).kind == "wrong_type");
}

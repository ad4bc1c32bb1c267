// The PIPO release unit (docs/design/pipo.md, "The release unit"): one release, bound parts,
// every mismatch refused with its reason, and never a silent fallback to plain decoding.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "engine/pipo/pipo_release.h"
#include "engine/pipo/pipo_fixture.h"

using namespace specchat;
using namespace specchat::test;

namespace {

PipoLoadOptions small_opts() {
  PipoLoadOptions o;
  o.backbone.n_ctx = 64;
  o.backbone.max_batch = 32;
  o.backbone.n_threads = 1;
  return o;
}

// Loads the fixture's unit and returns the refusal's kind; FAILs when it loads.
PipoErrorKind refusal(const PipoFixture& f, const PipoLoadOptions& o = small_opts(), std::string* msg = nullptr) {
  try {
    (void)load_pipo_release(f.dir.path.string(), o);
  } catch (const PipoError& e) {
    if (msg) *msg = e.what();
    return e.kind();
  }
  FAIL("the unit loaded");
  return PipoErrorKind::manifest;
}

}  // namespace

TEST_CASE("pipo release: a consistent unit loads, and says which release it is", "[unit][pipo]") {
  PipoFixture f;
  f.write();
  PipoUnit u = load_pipo_release(f.dir.path.string(), small_opts());
  CHECK(u.info.release == "test-release-1");
  CHECK(u.info.target_sha256 == f.target_sha);
  CHECK(u.info.recommended_threshold == Approx(0.5f));
  CHECK(u.info.quality_json.find("test") != std::string::npos);
  REQUIRE(u.backbone);
  REQUIRE(u.mtp);
  REQUIRE(u.io);
  CHECK(u.io->config().d_model == 64);
  // The manifest path itself works as well as its folder.
  PipoUnit u2 = load_pipo_release(f.manifest(), small_opts());
  CHECK(u2.info.release == u.info.release);
}

TEST_CASE("pipo release: the backbone is refused as a plain model", "[unit][pipo]") {
  PipoFixture f;
  f.write();
  LlamaModel::Options o;
  o.n_ctx = 32;
  try {
    (void)LlamaModel::load(f.path("backbone"), o);
    FAIL("a PIPO backbone loaded as a plain model");
  } catch (const ModelError& e) {
    const std::string m = e.what();
    CHECK(m.find("PIPO release 'test-release-1'") != std::string::npos);
    CHECK(m.find("pipo.json") != std::string::npos);
  }
}

TEST_CASE("pipo release: mixed releases are refused with the part named", "[unit][pipo]") {
  for (const std::string part : {"backbone", "mtp", "io"}) {
    DYNAMIC_SECTION("the " << part << " part from another release") {
      PipoFixture f;
      f.part_release[part] = "test-release-0";
      f.write();
      std::string msg;
      CHECK(refusal(f, small_opts(), &msg) == PipoErrorKind::mixed_release);
      CHECK(msg.find("the " + part + " part") != std::string::npos);
      CHECK(msg.find("test-release-0") != std::string::npos);
    }
    DYNAMIC_SECTION("the " << part << " part trained from another target") {
      PipoFixture f;
      f.part_target_sha[part] = std::string(64, 'b');
      f.write();
      CHECK(refusal(f) == PipoErrorKind::mixed_release);
    }
  }
}

TEST_CASE("pipo release: a part replaced after the release is refused by its hash", "[unit][pipo]") {
  PipoFixture f;
  f.write();
  // Another io part of the SAME release id written over the released one (a retrained head).
  PipoIoSpec s;
  s.seed = 99;
  MtpFile other = random_pipo_io(s);
  other.kv["pipo.release"] = gguf_value::string(f.release);
  other.kv["pipo.role"] = gguf_value::string("io");
  other.kv["pipo.target.sha256"] = gguf_value::string(f.target_sha);
  other.write(f.path("io"));
  std::string msg;
  CHECK(refusal(f, small_opts(), &msg) == PipoErrorKind::part_sha256);
  CHECK(msg.find("io part") != std::string::npos);
}

TEST_CASE("pipo release: parts in the wrong slot, unbound heads and bad shapes are refused", "[unit][pipo]") {
  SECTION("role") {
    PipoFixture f;
    f.part_role["io"] = "mtp";
    f.write();
    CHECK(refusal(f) == PipoErrorKind::wrong_role);
  }
  SECTION("an MTP head bound to another backbone") {
    PipoFixture f;
    f.mtp.kv["specchat.target.sha256"] = gguf_value::string(std::string(64, 'c'));
    f.write();
    std::string msg;
    CHECK(refusal(f, small_opts(), &msg) == PipoErrorKind::unbound_head);
    CHECK(msg.find("MTP head") != std::string::npos);
  }
  SECTION("an io part of another width") {
    PipoFixture f;
    PipoIoSpec s;
    s.d_model = 32;
    f.io = random_pipo_io(s);
    f.write();
    CHECK(refusal(f) == PipoErrorKind::wrong_shape);
  }
  SECTION("an io tensor the engine does not run") {
    PipoFixture f;
    f.io.tensors.push_back(f32_tensor("pipo.comp.fc3.weight", {4}, {1, 2, 3, 4}));
    f.write();
    CHECK(refusal(f) == PipoErrorKind::bad_setting);
  }
}

TEST_CASE("pipo release: manifests and settings SpecChat does not run are refused", "[unit][pipo]") {
  SECTION("pair_size") {
    PipoFixture f;
    f.pair_size = 3;
    f.write();
    CHECK(refusal(f) == PipoErrorKind::bad_setting);
  }
  SECTION("version") {
    PipoFixture f;
    f.version = 2;
    f.write();
    CHECK(refusal(f) == PipoErrorKind::manifest);
  }
  SECTION("format") {
    PipoFixture f;
    f.format = "other";
    f.write();
    CHECK(refusal(f) == PipoErrorKind::manifest);
  }
  SECTION("not JSON") {
    PipoFixture f;
    f.write();
    std::ofstream(f.manifest()) << "{\"format\": \"specchat-pipo\", ";
    CHECK(refusal(f) == PipoErrorKind::manifest);
  }
  SECTION("no manifest") {
    PipoFixture f;
    f.write();
    std::filesystem::remove(f.manifest());
    CHECK(refusal(f) == PipoErrorKind::manifest);
  }
  SECTION("a missing part") {
    PipoFixture f;
    f.write();
    std::filesystem::remove(f.path("mtp"));
    CHECK(refusal(f) == PipoErrorKind::missing_part);
  }
  SECTION("a part that is not GGUF (its hash in the manifest)") {
    PipoFixture f;
    f.write();
    std::ofstream(f.path("io"), std::ios::binary | std::ios::trunc) << "not a gguf file";
    f.write_manifest();
    std::string msg;
    CHECK(refusal(f, small_opts(), &msg) == PipoErrorKind::missing_part);
    CHECK(msg.find("not a readable GGUF file") != std::string::npos);
  }
}

TEST_CASE("pipo release: a plain target that is not the release's is refused", "[unit][pipo]") {
  PipoFixture f;
  const std::string target = f.dir.file("target.gguf");
  std::ofstream(target, std::ios::binary) << "the plain target's bytes";
  f.target_sha = sha256_file_hex(target);
  f.write();
  PipoLoadOptions o = small_opts();
  o.plain_target = target;
  CHECK_NOTHROW(load_pipo_release(f.dir.path.string(), o));
  std::ofstream(target, std::ios::binary | std::ios::trunc) << "another target";
  std::string msg;
  CHECK(refusal(f, o, &msg) == PipoErrorKind::target_mismatch);
  CHECK(msg.find("test-release-1") != std::string::npos);
}

TEST_CASE("pipo release: a part that is not a regular file is refused, not hashed forever", "[unit][pipo]") {
  PipoFixture f;
  f.write();
  // A manifest whose io part is a device (/dev/zero would hash forever).
  std::ifstream in(f.manifest());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string from = "\"io\": {\"file\": \"io.gguf\"";
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), "\"io\": {\"file\": \"/dev/zero\"");
  std::ofstream(f.manifest(), std::ios::trunc) << text;
  std::string msg;
  CHECK(refusal(f, small_opts(), &msg) == PipoErrorKind::missing_part);
  CHECK(msg.find("not a regular file") != std::string::npos);
}

#include "engine/pipo/pipo_release.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/drafters/bind_error.h"
#include "engine/drafters/sha256.h"
#include "engine/gguf.h"

namespace specchat {

namespace {

using nlohmann::json;
using K = PipoErrorKind;
namespace fs = std::filesystem;

constexpr const char* kParts[3] = {"backbone", "mtp", "io"};

std::string hash_of(const std::string& file, const std::string& what) {
  try {
    return sha256_file_hex(file);
  } catch (const std::exception& e) {
    throw PipoError(K::missing_part, what + " " + file + " cannot be read: " + e.what());
  }
}

std::string str_field(const json& j, const std::string& key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) throw PipoError(K::manifest, where + ": field '" + key + "' (a string) is missing");
  return it->get<std::string>();
}

// The part's binding keys, checked against the manifest.
void check_part_keys(const std::string& slot, const std::string& file, const std::string& release,
                     const std::string& target_sha) {
  GgufFile f = [&] {
    try {
      return GgufFile::open(file);
    } catch (const GgufError& e) {
      throw PipoError(K::missing_part, "the " + slot + " part " + file + " is not a readable GGUF file: " + e.what());
    }
  }();
  auto key = [&](const std::string& k) -> std::string {
    if (!f.has(k)) throw PipoError(K::mixed_release, "the " + slot + " part " + file + " has no '" + k + "' key: not part of a PIPO release");
    return f.get_string(k);
  };
  const std::string role = key("pipo.role");
  if (role != slot) throw PipoError(K::wrong_role, file + " is a '" + role + "' part in the '" + slot + "' slot");
  const std::string rel = key("pipo.release");
  if (rel != release) {
    throw PipoError(K::mixed_release, "the " + slot + " part " + file + " is from release '" + rel + "', the manifest's release is '" +
                                          release + "': the parts of a unit are released together");
  }
  const std::string tsha = key("pipo.target.sha256");
  if (tsha != target_sha) {
    throw PipoError(K::mixed_release, "the " + slot + " part " + file + " was trained from target " + tsha +
                                          ", the manifest's target is " + target_sha);
  }
}

}  // namespace

PipoUnit load_pipo_release(const std::string& path, const PipoLoadOptions& opt) {
  const fs::path manifest = fs::is_directory(path) ? fs::path(path) / "pipo.json" : fs::path(path);
  const fs::path dir = manifest.parent_path();
  json m;
  {
    std::ifstream in(manifest);
    if (!in) throw PipoError(K::manifest, manifest.string() + " cannot be read");
    try {
      m = json::parse(in);
    } catch (const json::exception& e) {
      throw PipoError(K::manifest, manifest.string() + " is not valid JSON: " + e.what());
    }
  }
  const std::string where = manifest.string();
  if (!m.is_object()) throw PipoError(K::manifest, where + " is not a JSON object");
  if (m.value("format", std::string()) != "specchat-pipo") throw PipoError(K::manifest, where + ": format is not \"specchat-pipo\"");
  if (!m.contains("version") || !m["version"].is_number_integer() || m["version"].get<int>() != 1) {
    throw PipoError(K::manifest, where + ": version is not 1 (this SpecChat reads version 1)");
  }
  PipoUnit u;
  PipoReleaseInfo& info = u.info;
  info.manifest_path = where;
  info.release = str_field(m, "release", where);
  if (info.release.empty()) throw PipoError(K::manifest, where + ": the release id is empty");
  auto int_field = [&](const char* k, int want) {
    if (!m.contains(k)) return;
    if (!m[k].is_number_integer() || m[k].get<int>() != want) {
      throw PipoError(K::bad_setting, where + ": " + k + " is " + m[k].dump() + "; SpecChat runs " + std::to_string(want));
    }
  };
  int_field("pair_size", 2);
  int_field("extra_draft_tokens", 1);
  if (m.contains("recommended_threshold")) {
    const json& t = m["recommended_threshold"];
    if (!t.is_number() || !std::isfinite(t.get<double>()) || t.get<double>() < 0 || t.get<double>() > 1) {
      throw PipoError(K::bad_setting, where + ": recommended_threshold " + t.dump() + " is outside [0, 1]");
    }
    info.recommended_threshold = t.get<float>();
  }
  info.quality_json = m.contains("quality") ? m["quality"].dump() : "{}";
  if (!m.contains("target") || !m["target"].is_object()) throw PipoError(K::manifest, where + ": the 'target' object is missing");
  info.target_sha256 = str_field(m["target"], "sha256", where + " target");
  if (m["target"].contains("file") && m["target"]["file"].is_string()) {
    info.target_file = (dir / m["target"]["file"].get<std::string>()).lexically_normal().string();
  }
  if (!m.contains("parts") || !m["parts"].is_object()) throw PipoError(K::manifest, where + ": the 'parts' object is missing");
  std::string files[3];
  for (int i = 0; i < 3; ++i) {
    const std::string slot = kParts[i];
    if (!m["parts"].contains(slot) || !m["parts"][slot].is_object()) {
      throw PipoError(K::manifest, where + ": part '" + slot + "' is missing");
    }
    const json& p = m["parts"][slot];
    files[i] = (dir / str_field(p, "file", where + " part " + slot)).string();
    const std::string want = str_field(p, "sha256", where + " part " + slot);
    if (!fs::exists(files[i])) throw PipoError(K::missing_part, "the " + slot + " part " + files[i] + " does not exist");
    // A device or pipe would be hashed forever (/dev/zero) or block (a FIFO).
    if (!fs::is_regular_file(files[i])) {
      throw PipoError(K::missing_part, "the " + slot + " part " + files[i] + " is not a regular file");
    }
    const std::string got = hash_of(files[i], "the " + slot + " part");
    if (got != want) {
      throw PipoError(K::part_sha256, "the " + slot + " part " + files[i] + " has sha256 " + got + ", the manifest says " + want +
                                          " (a part replaced after the release was made)");
    }
    check_part_keys(slot, files[i], info.release, info.target_sha256);
  }
  const std::string plain = !opt.plain_target.empty() ? opt.plain_target
                            : opt.check_release_target ? info.target_file : std::string();
  if (opt.check_release_target && plain.empty()) {
    throw PipoError(K::manifest, where + ": target.file is missing, and no plain target was given");
  }
  if (!plain.empty()) {
    if (!fs::is_regular_file(plain)) throw PipoError(K::missing_part, "the plain target " + plain + " is not a regular file");
    const std::string got = hash_of(plain, "the plain target");
    if (got != info.target_sha256) {
      throw PipoError(K::target_mismatch, "the plain target " + plain + " has sha256 " + got + "; release '" +
                                              info.release + "' was made from " + info.target_sha256);
    }
  }
  LlamaModel::Options bo = opt.backbone;
  bo.pipo_backbone = true;
  u.backbone = LlamaModel::load(files[0], bo);
  MtpModel::Options mo;
  mo.pool = u.backbone->cpu_pool();
  try {
    u.mtp = MtpModel::load(files[1], *u.backbone, mo);
  } catch (const DrafterBindError& e) {
    throw PipoError(K::unbound_head, std::string("the MTP head does not belong to this backbone: ") + e.what());
  }
  u.io = PipoIo::load(files[2], *u.backbone, u.backbone->cpu_pool());
  return u;
}

}  // namespace specchat

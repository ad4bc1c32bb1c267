#include "engine/drafters/install.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engine/drafters/dflash_model.h"
#include "engine/drafters/mtp_model.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/runtime/engine.h"
#include "engine/speculative/drafter_factory.h"

namespace specchat {

namespace fs = std::filesystem;

std::string find_feature_drafter(const std::string& target_path, const std::string& arch) {
  if (target_path.empty()) return {};
  std::error_code ec;
  const fs::path parent = fs::path(target_path).parent_path();
  const fs::path dir = parent.empty() ? fs::path(".") : parent;
  std::vector<std::pair<uintmax_t, std::string>> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec) || e.path().extension() != ".gguf") continue;
    if (fs::equivalent(e.path(), target_path, ec)) continue;
    try {
      const GgufFile f = GgufFile::open(e.path().string());
      if (f.get_string_or("general.architecture", "") == arch) found.emplace_back(e.file_size(ec), e.path().string());
    } catch (const std::exception&) {
      // not a readable GGUF: not a candidate
    }
  }
  std::sort(found.begin(), found.end());
  return found.empty() ? std::string() : found.front().second;
}

namespace {

// The file given, else one beside the target, else "" (optional) or an error saying what to pass.
std::string drafter_file(const std::string& given, const LlamaModel& target, const std::string& arch,
                         const std::string& flag, bool optional) {
  if (!given.empty()) return given;
  const std::string p = find_feature_drafter(target.path(), arch);
  if (p.empty() && !optional) {
    throw std::runtime_error("no " + arch + " drafter beside " + target.path() + ": pass " + flag + " FILE");
  }
  return p;
}

}  // namespace

FeatureDrafters install_feature_drafters(Engine& engine, const FeatureDrafterRequest& req) {
  FeatureDrafters fd;
  LlamaModel& target = engine.target();
  if (req.mtp) {
    fd.mtp_path = drafter_file(req.mtp_path, target, "specchat-mtp", req.mtp_flag, req.optional);
    if (!fd.mtp_path.empty()) {
      MtpModel::Options mo;
      mo.pool = target.cpu_pool();  // the engine's pool: the head runs between target forwards
      std::shared_ptr<const MtpModel> m = MtpModel::load(fd.mtp_path, target, mo);
      DrafterModels models;
      models.target = &target;
      models.mtp = m;
      engine.set_drafter_factory(DrafterKind::mtp, [models](int slot) { return make_drafter(DrafterKind::mtp, slot, models); });
      fd.mtp = true;
    }
  }
  if (req.block) {
    fd.block_path = drafter_file(req.block_path, target, "dflash", req.block_flag, req.optional);
    if (!fd.block_path.empty()) {
      DFlashOptions opt;
      opt.n_threads = req.n_threads;
      opt.pool = target.cpu_pool();  // one pool for the target and the drafter (null on CUDA)
      std::shared_ptr<const DFlashModel> m = DFlashModel::load(fd.block_path, target, opt);
      DrafterModels models;
      models.target = &target;
      models.block = m;
      engine.set_drafter_factory(DrafterKind::block, [models](int slot) { return make_drafter(DrafterKind::block, slot, models); });
      fd.block_size = m->block_size();
    }
  }
  return fd;
}

}  // namespace specchat

// Installing the drafters that read the target's hidden states (the DFlash block drafter and
// the MTP head, docs/design/target-feature-drafters.md) into an Engine: the one place every
// front end (CLI, app, server) loads their files, finds them beside the target and binds them.
#pragma once

#include <string>

namespace specchat {

class Engine;

// What install_feature_drafters installed, for RequestPlanner::set_feature_drafters.
struct FeatureDrafters {
  int block_size = 0;      // the block drafter's B (anchor + B − 1 drafted tokens); 0 = none installed
  bool mtp = false;        // an MTP head is installed
  std::string block_path;  // the files loaded ("" = none)
  std::string mtp_path;
};

struct FeatureDrafterRequest {
  bool block = false;         // install the block drafter
  bool mtp = false;           // install the MTP head
  std::string block_path;     // its file; "" = find_feature_drafter(target, "dflash")
  std::string mtp_path;       // "" = find_feature_drafter(target, "specchat-mtp")
  // With nothing given and nothing found beside the target: false = throw std::runtime_error
  // naming `block_flag` / `mtp_flag` (what to pass); true = silently install nothing (the app
  // and the server offer what they find).
  bool optional = false;
  std::string block_flag = "--block-drafter", mtp_flag = "--mtp";
  int n_threads = 0;          // the block drafter's CPU threads (0 = all cores)
};

// Loads and binds the requested drafters and installs one per KV slot of `engine`
// (Engine::set_drafter_factory). Throws DrafterBindError (a file bound to another target, a
// missing tensor, another architecture, ...), GgufError (unreadable file), or std::runtime_error
// when a required file was not given and none lies beside the target.
FeatureDrafters install_feature_drafters(Engine& engine, const FeatureDrafterRequest& req);

// The smallest `.gguf` beside `target_path` (same folder, not the target itself) whose
// general.architecture is `arch` ("dflash", "specchat-mtp"); "" when there is none. Files that
// do not open as GGUF are skipped. Whether it binds to the target is checked at load.
std::string find_feature_drafter(const std::string& target_path, const std::string& arch);

}  // namespace specchat

#include "app/cli/data_files.h"

#include <filesystem>
#include <stdexcept>
#include <vector>

namespace specchat::cli {

namespace fs = std::filesystem;

std::string bundled_data_file(const std::string& name) {
  std::vector<fs::path> tried;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) tried.push_back(exe.parent_path().parent_path() / "share" / "specchat" / "bench" / name);
  for (const fs::path& root : {fs::path(SPECCHAT_SOURCE_DIR), fs::path(".")}) {
    tried.push_back(root / "resources" / "bench" / name);
    tried.push_back(root / "tests" / "data" / name);
  }
  for (const fs::path& p : tried) {
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  }
  std::string list;
  for (const fs::path& p : tried) list += (list.empty() ? "" : ", ") + p.lexically_normal().string();
  throw std::runtime_error("the bundled file " + name + " is not installed (tried " + list + ")");
}

}  // namespace specchat::cli

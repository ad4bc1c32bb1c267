// Branch tree of a conversation (see branches.h).
#include "storage/branches.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace specchat::branches {

std::vector<Message> active_path(const std::vector<Message>& all) {
  // parent id -> index of its chosen child (the newest if a damaged file holds several).
  std::unordered_map<int64_t, size_t> chosen;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!all[i].active) continue;
    auto [it, fresh] = chosen.try_emplace(all[i].parent_id, i);
    if (!fresh && all[i].id > all[it->second].id) it->second = i;
  }
  std::vector<Message> path;
  int64_t at = 0;
  // Each step moves to a message whose parent is the previous one, so the walk cannot revisit
  // one; the bound only guards against a damaged file with an id equal to its parent.
  while (path.size() < all.size()) {
    const auto it = chosen.find(at);
    if (it == chosen.end() || all[it->second].id == at) break;
    path.push_back(all[it->second]);
    at = path.back().id;
  }
  return path;
}

std::vector<Message> alternatives(const std::vector<Message>& all, int64_t id) {
  const auto self = std::find_if(all.begin(), all.end(), [id](const Message& m) { return m.id == id; });
  if (self == all.end()) return {};
  std::vector<Message> out;
  for (const Message& m : all)
    if (m.parent_id == self->parent_id) out.push_back(m);
  std::sort(out.begin(), out.end(), [](const Message& a, const Message& b) { return a.id < b.id; });
  return out;
}

void infer_legacy_parents(std::vector<Message>& all) {
  int64_t last_on_path = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    Message& m = all[i];
    if (m.active) {
      m.parent_id = last_on_path;
      last_on_path = m.id;
    } else if (i == 0) {
      m.parent_id = 0;
    } else {
      const Message& before = all[i - 1];
      m.parent_id = before.role == m.role ? before.parent_id : before.id;
    }
  }
}

void validate_tree(const std::vector<Message>& all) {
  std::unordered_set<int64_t> seen;
  std::unordered_set<int64_t> chosen_under;  // parents that already have a chosen child
  for (size_t i = 0; i < all.size(); ++i) {
    const Message& m = all[i];
    const std::string which = "message " + std::to_string(i);
    if (m.id <= 0 || !seen.insert(m.id).second)
      throw StorageError("invalid", which + ": id " + std::to_string(m.id) + " is not positive and unique");
    if (m.parent_id != 0 && (m.parent_id == m.id || !seen.count(m.parent_id)))
      throw StorageError("invalid", which + ": its parent " + std::to_string(m.parent_id) +
                                        " is not a message before it");
    if (m.active && !chosen_under.insert(m.parent_id).second)
      throw StorageError("invalid", which + ": a second active alternative at one place (only one of the "
                                            "messages sharing a parent can be active)");
  }
}

}  // namespace specchat::branches

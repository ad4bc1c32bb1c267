#include "app/serve/draft_policy.h"

#include <stdexcept>
#include <string>

namespace specchat::serve {

DraftLengthPolicy::DraftLengthPolicy(int full_max, int off_at, int short_nodes)
    : full_max_(full_max), off_at_(off_at), short_nodes_(short_nodes) {
  if (full_max < 1 || off_at <= full_max + 1 || short_nodes < 1) {
    throw std::invalid_argument("DraftLengthPolicy: need full_max >= 1, off_at > full_max + 1, short_nodes >= 1 (got " +
                                std::to_string(full_max) + ", " + std::to_string(off_at) + ", " +
                                std::to_string(short_nodes) + ")");
  }
}

int DraftLengthPolicy::level_for(int n) const {
  if (n <= full_max_) return 0;
  if (n < off_at_) return 1;
  return 2;
}

int DraftLengthPolicy::cap(int n_active) {
  const int want = level_for(n_active);
  if (want > level_) {
    level_ = want;  // a wider batch: shorten at once
  } else if (want == 0) {
    level_ = 0;  // a request alone always gets its own draft
  } else if (want < level_ && level_for(n_active + 1) < level_) {
    level_ = level_for(n_active + 1);  // narrower by at least one past the threshold: lengthen
  }
  return level_ == 0 ? -1 : level_ == 1 ? short_nodes_ : 0;
}

}  // namespace specchat::serve

#include "engine/speculative/draft_backoff.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace specchat {

DraftBackoff::DraftBackoff(int strikes, int first_pause, int max_pause)
    : strikes_(strikes), first_pause_(first_pause), max_pause_(max_pause), next_pause_(first_pause) {
  if (strikes < 1 || first_pause < 1 || max_pause < first_pause) {
    throw std::invalid_argument("DraftBackoff: need strikes >= 1 and 1 <= first_pause <= max_pause (got " +
                                std::to_string(strikes) + ", " + std::to_string(first_pause) + ", " +
                                std::to_string(max_pause) + ")");
  }
}

bool DraftBackoff::should_draft() {
  if (pause_left_ > 0) {
    --pause_left_;
    ++suspended_;
    return false;
  }
  return true;
}

void DraftBackoff::drafted_step(int n_accepted) {
  probe_ = false;
  if (n_accepted > 0) {
    fails_ = 0;
    next_pause_ = first_pause_;
    return;
  }
  if (++fails_ < strikes_) return;
  pause_left_ = next_pause_;
  probe_ = true;
  next_pause_ = std::min(2 * next_pause_, max_pause_);
  fails_ = strikes_ - 1;  // one more failed probe starts the next (longer) pause
}

}  // namespace specchat

// The terminal progress bar of `specchat-cli bench`: done/total, a bar, elapsed time and an ETA
// from the mean time per request so far. Drawn on stderr only when stderr is a terminal.
#pragma once

#include <string>

namespace specchat::bench {

// One line (no newline): "[#####.....]  42/120  35%  elapsed 0:12  ETA 0:22". `width` = bar
// cells. The ETA is "--:--" before the first request finishes. total ≤ 0 shows 0%.
std::string progress_line(long done, long total, double elapsed_s, int width = 30);

// Draws progress_line on stderr with a carriage return when stderr is a TTY (isatty), and a
// newline when done == total; does nothing otherwise (logs and CI stay clean).
class ProgressBar {
 public:
  ProgressBar();
  void update(long done, long total, double elapsed_s);
  bool enabled() const { return tty_; }

 private:
  bool tty_;
};

}  // namespace specchat::bench

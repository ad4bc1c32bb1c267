#include "app/cli/bench/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace specchat::bench {

namespace {
std::string clock_text(double s) {
  const long t = static_cast<long>(std::lround(std::max(0.0, s)));
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}
}  // namespace

std::string progress_line(long done, long total, double elapsed_s, int width) {
  const double frac = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(std::lround(frac * width));
  std::string bar = "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.') + "]";
  const std::string eta = done > 0 && total > 0 ? clock_text(elapsed_s / static_cast<double>(done) * static_cast<double>(total - done)) : "--:--";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %4ld/%ld %3d%%  elapsed %s  ETA %s", bar.c_str(), done, total,
                static_cast<int>(std::lround(frac * 100)), clock_text(elapsed_s).c_str(), eta.c_str());
  return buf;
}

ProgressBar::ProgressBar() : tty_(isatty(STDERR_FILENO) == 1) {}

void ProgressBar::update(long done, long total, double elapsed_s) {
  if (!tty_) return;
  std::fprintf(stderr, "\r%s", progress_line(done, total, elapsed_s).c_str());
  if (done >= total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace specchat::bench

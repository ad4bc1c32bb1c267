// The report's plots, drawn by Qt Charts (qt6-charts-dev) and written as inline SVG through
// QSvgGenerator (libqt6svg6-dev). Plain data in, one <svg> element out: no XML prolog, no
// namespace URL (HTML5 puts <svg> in the SVG namespace itself), so report.html holds no URL.
// Needs a QApplication (Qt Charts items are QGraphicsWidgets): ensure_qt_app() makes one on the
// offscreen platform when the process has none (the CLI).
#pragma once

#include <QtGlobal>
#include <string>
#include <vector>

QT_FORWARD_DECLARE_CLASS(QChart)

namespace specchat::bench {

struct ChartSize {
  int width = 720, height = 360;  // SVG user units (px)
};

// One named series of numbers, one value per category (bar charts) or per x (line charts).
struct ChartSeries {
  std::string name;
  std::vector<double> values;
};

// A five-number box per category: lo / q1 / mid / q3 / hi (box plots of distributions, or a
// 95% CI drawn as lo = q1 = CI low, mid = mean, q3 = hi = CI high).
struct BoxValue {
  double lo = 0, q1 = 0, mid = 0, q3 = 0, hi = 0;
};
struct BoxSeries {
  std::string name;
  std::vector<BoxValue> boxes;  // [categories]
};

// Creates a QApplication on the "offscreen" platform when none exists (kept for the process).
void ensure_qt_app();

// Grouped bars: one group per category, one bar per series.
std::string bar_chart_svg(const std::string& title, const std::vector<std::string>& categories,
                          const std::vector<ChartSeries>& series, const std::string& y_label, ChartSize size = {});
// The same grouped bars as a QChart for a QChartView (the app's Benchmark view); the caller
// owns it. Needs a QApplication.
QChart* bar_chart(const std::string& title, const std::vector<std::string>& categories,
                  const std::vector<ChartSeries>& series, const std::string& y_label);

// Lines over numeric x (x shared by all series; a NaN value leaves a gap).
std::string line_chart_svg(const std::string& title, const std::vector<double>& x, const std::vector<ChartSeries>& series,
                           const std::string& x_label, const std::string& y_label, ChartSize size = {});
// Box plots, one group per category, one box per series.
std::string box_chart_svg(const std::string& title, const std::vector<std::string>& categories,
                          const std::vector<BoxSeries>& series, const std::string& y_label, ChartSize size = {});

}  // namespace specchat::bench

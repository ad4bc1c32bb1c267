#include "app/cli/bench/charts.h"

#include <QApplication>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QBoxPlotSeries>
#include <QBoxSet>
#include <QBuffer>
#include <QChart>
#include <QGraphicsScene>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPainter>
#include <QScatterSeries>
#include <QSvgGenerator>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <memory>

namespace specchat::bench {

void ensure_qt_app() {
  if (QCoreApplication::instance()) return;
  qputenv("QT_QPA_PLATFORM", "offscreen");
  static int argc = 1;
  static char name[] = "specchat-cli";
  static char* argv[] = {name, nullptr};
  static QApplication* app = new QApplication(argc, argv);  // lives for the process
  (void)app;
}

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

// Renders the chart through a QChartView into SVG and strips what HTML5 inline SVG does not
// need: the XML prolog and the namespace declarations (their URLs).
std::string render_svg(QChart* chart, ChartSize size) {
  ensure_qt_app();
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->legend()->setAlignment(Qt::AlignBottom);
  // The chart in a scene of its own, laid out at the final size (a view that is never shown
  // would keep the chart at its default size), then painted into the SVG generator.
  QGraphicsScene scene;
  scene.addItem(chart);  // the scene owns the chart
  chart->setGeometry(QRectF(0, 0, size.width, size.height));
  scene.setSceneRect(chart->geometry());
  QCoreApplication::processEvents();  // the chart's layout is computed on posted events
  QBuffer buf;
  buf.open(QIODevice::WriteOnly);
  QSvgGenerator gen;
  gen.setOutputDevice(&buf);
  gen.setSize(QSize(size.width, size.height));
  gen.setViewBox(QRect(0, 0, size.width, size.height));
  {
    QPainter p(&gen);
    p.setRenderHint(QPainter::Antialiasing);
    scene.render(&p, QRectF(0, 0, size.width, size.height), scene.sceneRect());
  }
  std::string s = buf.data().toStdString();
  const size_t start = s.find("<svg");
  if (start != std::string::npos) s.erase(0, start);
  for (const char* ns : {" xmlns=\"http://www.w3.org/2000/svg\"", " xmlns:xlink=\"http://www.w3.org/1999/xlink\""}) {
    for (size_t at; (at = s.find(ns)) != std::string::npos;) s.erase(at, std::char_traits<char>::length(ns));
  }
  for (size_t at; (at = s.find("xlink:href")) != std::string::npos;) s.replace(at, 10, "href");
  return s;
}

QValueAxis* value_axis(const std::string& label, double lo, double hi) {
  auto* a = new QValueAxis;
  a->setTitleText(q(label));
  if (!(hi > lo)) hi = lo + 1;
  const double pad = (hi - lo) * 0.08;
  a->setRange(lo >= 0 && lo - pad < 0 ? 0 : lo - pad, hi + pad);
  a->applyNiceNumbers();
  return a;
}

QChart* new_chart(const std::string& title) {
  ensure_qt_app();  // before any Qt Charts object
  auto* c = new QChart;
  c->setTitle(q(title));
  c->setBackgroundRoundness(0);
  return c;
}

}  // namespace

std::string bar_chart_svg(const std::string& title, const std::vector<std::string>& categories,
                          const std::vector<ChartSeries>& series, const std::string& y_label, ChartSize size) {
  return render_svg(bar_chart(title, categories, series, y_label), size);
}

QChart* bar_chart(const std::string& title, const std::vector<std::string>& categories,
                  const std::vector<ChartSeries>& series, const std::string& y_label) {
  QChart* chart = new_chart(title);
  auto* bars = new QBarSeries;
  double hi = 0;
  for (const ChartSeries& s : series) {
    auto* set = new QBarSet(q(s.name));
    for (double v : s.values) {
      *set << (std::isfinite(v) ? v : 0);
      if (std::isfinite(v)) hi = std::max(hi, v);
    }
    bars->append(set);
  }
  chart->addSeries(bars);
  auto* x = new QBarCategoryAxis;
  for (const std::string& c : categories) x->append(q(c));
  x->setLabelsAngle(categories.size() > 6 ? -90 : 0);  // upright names overlap and are dropped
  x->setTruncateLabels(false);  // "summarization" in full, not "s…"
  chart->addAxis(x, Qt::AlignBottom);
  bars->attachAxis(x);
  QValueAxis* y = value_axis(y_label, 0, hi);
  chart->addAxis(y, Qt::AlignLeft);
  bars->attachAxis(y);
  chart->legend()->setAlignment(Qt::AlignBottom);
  return chart;
}

std::string line_chart_svg(const std::string& title, const std::vector<double>& xs, const std::vector<ChartSeries>& series,
                           const std::string& x_label, const std::string& y_label, ChartSize size) {
  QChart* chart = new_chart(title);
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  std::vector<QXYSeries*> all;
  for (const ChartSeries& s : series) {
    auto* line = new QLineSeries;
    auto* dots = new QScatterSeries;  // markers, so a one-point series still shows
    line->setName(q(s.name));
    dots->setMarkerSize(7);
    for (size_t i = 0; i < xs.size() && i < s.values.size(); ++i) {
      if (!std::isfinite(s.values[i])) continue;
      line->append(xs[i], s.values[i]);
      dots->append(xs[i], s.values[i]);
      xlo = std::min(xlo, xs[i]);
      xhi = std::max(xhi, xs[i]);
      ylo = std::min(ylo, s.values[i]);
      yhi = std::max(yhi, s.values[i]);
    }
    chart->addSeries(line);
    chart->addSeries(dots);
    dots->setColor(line->color());
    chart->legend()->markers(dots).front()->setVisible(false);
    all.push_back(line);
    all.push_back(dots);
  }
  if (!std::isfinite(xlo)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  QValueAxis* x = value_axis(x_label, xlo, xhi);
  QValueAxis* y = value_axis(y_label, std::min(0.0, ylo), yhi);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QXYSeries* s : all) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  return render_svg(chart, size);
}

std::string box_chart_svg(const std::string& title, const std::vector<std::string>& categories,
                          const std::vector<BoxSeries>& series, const std::string& y_label, ChartSize size) {
  QChart* chart = new_chart(title);
  double lo = INFINITY, hi = -INFINITY;
  std::vector<QBoxPlotSeries*> all;
  for (const BoxSeries& s : series) {
    auto* bs = new QBoxPlotSeries;
    bs->setName(q(s.name));
    for (size_t i = 0; i < s.boxes.size(); ++i) {
      const BoxValue& b = s.boxes[i];
      auto* set = new QBoxSet(b.lo, b.q1, b.mid, b.q3, b.hi, i < categories.size() ? q(categories[i]) : QString());
      bs->append(set);
      lo = std::min(lo, b.lo);
      hi = std::max(hi, b.hi);
    }
    chart->addSeries(bs);
    all.push_back(bs);
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  auto* x = new QBarCategoryAxis;
  for (const std::string& c : categories) x->append(q(c));
  x->setLabelsAngle(categories.size() > 6 ? -90 : 0);  // upright names overlap and are dropped
  x->setTruncateLabels(false);  // "summarization" in full, not "s…"
  QValueAxis* y = value_axis(y_label, lo, hi);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QBoxPlotSeries* s : all) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  return render_svg(chart, size);
}

}  // namespace specchat::bench

#include "ui/stat_charts.h"

#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <numeric>

namespace specchat::ui {

namespace {

QColor accent(const QPalette& pal) { return pal.color(QPalette::Highlight); }

}  // namespace

Sparkline::Sparkline(QWidget* parent) : QWidget(parent) { setMinimumHeight(36); }

void Sparkline::setValues(std::vector<float> values) {
  values_ = std::move(values);
  update();
}

void Sparkline::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF r = QRectF(rect()).adjusted(2, 3, -4, -3);
  p.setPen(QPen(palette().color(QPalette::Mid), 1));
  p.drawLine(r.bottomLeft(), r.bottomRight());
  if (values_.size() < 2) return;
  const float top = std::max(1e-6f, *std::max_element(values_.begin(), values_.end()));
  const double dx = r.width() / static_cast<double>(values_.size() - 1);
  QPainterPath line;
  for (size_t i = 0; i < values_.size(); ++i) {
    const QPointF pt(r.left() + dx * static_cast<double>(i),
                     r.bottom() - r.height() * static_cast<double>(std::max(0.f, values_[i]) / top));
    if (i == 0) line.moveTo(pt);
    else line.lineTo(pt);
  }
  QPainterPath area = line;
  area.lineTo(r.right(), r.bottom());
  area.lineTo(r.left(), r.bottom());
  area.closeSubpath();
  QColor fill = accent(palette());
  fill.setAlpha(50);
  p.fillPath(area, fill);
  p.setPen(QPen(accent(palette()), 1.6));
  p.drawPath(line);
  p.setBrush(accent(palette()));
  p.drawEllipse(line.currentPosition(), 2.5, 2.5);
}

Histogram::Histogram(QWidget* parent) : QWidget(parent) { setMinimumHeight(56); }

void Histogram::setCounts(std::vector<int> counts) {
  counts_ = std::move(counts);
  update();
}

void Histogram::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const int label_h = fontMetrics().height();
  const QRectF r = QRectF(rect()).adjusted(2, 2, -2, -label_h - 2);
  p.setPen(QPen(palette().color(QPalette::Mid), 1));
  p.drawLine(r.bottomLeft(), r.bottomRight());
  if (counts_.empty()) return;
  const int top = std::max(1, *std::max_element(counts_.begin(), counts_.end()));
  const double slot = r.width() / static_cast<double>(counts_.size());
  const double bar_w = std::max(2.0, slot * 0.7);
  for (size_t i = 0; i < counts_.size(); ++i) {
    const double h = r.height() * counts_[i] / top;
    const double x = r.left() + slot * static_cast<double>(i) + (slot - bar_w) / 2;
    p.fillRect(QRectF(x, r.bottom() - h, bar_w, h), accent(palette()));
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(QRectF(r.left() + slot * static_cast<double>(i), r.bottom() + 1, slot, label_h),
               Qt::AlignHCenter | Qt::AlignTop, QString::number(i));
  }
}

SplitBar::SplitBar(QWidget* parent) : QWidget(parent) { setMinimumHeight(10); }

void SplitBar::setParts(std::vector<double> parts) {
  parts_ = std::move(parts);
  update();
}

QColor SplitBar::partColor(int i) {
  // Distinguishable on light and dark themes and for the common colour-vision deficiencies.
  static const QColor colors[] = {QColor(0xE6, 0x9F, 0x00), QColor(0x00, 0x72, 0xB2), QColor(0x00, 0x9E, 0x73),
                                  QColor(0xCC, 0x79, 0xA7)};
  return colors[static_cast<size_t>(i) % (sizeof colors / sizeof colors[0])];
}

void SplitBar::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QRectF r = QRectF(rect()).adjusted(1, 1, -1, -1);
  p.fillRect(r, palette().color(QPalette::AlternateBase));
  const double total = std::accumulate(parts_.begin(), parts_.end(), 0.0);
  if (total <= 0) return;
  double x = r.left();
  for (size_t i = 0; i < parts_.size(); ++i) {
    const double w = r.width() * std::max(0.0, parts_[i]) / total;
    p.fillRect(QRectF(x, r.top(), w, r.height()), partColor(static_cast<int>(i)));
    x += w;
  }
}

}  // namespace specchat::ui

// Small custom-painted charts for the live panel: a sparkline, a bar histogram and a stacked
// proportion bar. Plain data in, QPainter out; no chart library.
#pragma once

#include <QColor>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <vector>

namespace specchat::ui {

// A line over a series of values (e.g. tokens/s after each token), scaled to its maximum,
// with the area under it softly filled and the last value marked.
class Sparkline : public QWidget {
  Q_OBJECT

 public:
  explicit Sparkline(QWidget* parent = nullptr);
  void setValues(std::vector<float> values);
  const std::vector<float>& values() const { return values_; }
  QSize sizeHint() const override { return {220, 44}; }

 protected:
  void paintEvent(QPaintEvent* e) override;

 private:
  std::vector<float> values_;
};

// Vertical bars for counts[i] (e.g. steps by accepted length i), labelled 0..n−1 underneath.
class Histogram : public QWidget {
  Q_OBJECT

 public:
  explicit Histogram(QWidget* parent = nullptr);
  void setCounts(std::vector<int> counts);
  const std::vector<int>& counts() const { return counts_; }
  QSize sizeHint() const override { return {220, 64}; }

 protected:
  void paintEvent(QPaintEvent* e) override;

 private:
  std::vector<int> counts_;
};

// One horizontal bar split in proportion to `parts` (e.g. draft / verify / sampling time),
// each part in its colour; parts of zero take no room.
class SplitBar : public QWidget {
  Q_OBJECT

 public:
  explicit SplitBar(QWidget* parent = nullptr);
  void setParts(std::vector<double> parts);
  const std::vector<double>& parts() const { return parts_; }
  // Colours of parts 0, 1, 2, … (cycled).
  static QColor partColor(int i);
  QSize sizeHint() const override { return {220, 14}; }

 protected:
  void paintEvent(QPaintEvent* e) override;

 private:
  std::vector<double> parts_;
};

}  // namespace specchat::ui

#include "ui/compare_view.h"

#include <QGridLayout>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QLabel>
#include <QMetaMethod>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QShortcut>
#include <QTextCursor>
#include <QVBoxLayout>

#include <nlohmann/json.hpp>

#include <cmath>

#include "ui/engine_worker.h"

namespace specchat::ui {

namespace {

// Compare ids carry bit 62 so they never equal a chat job's id on the same worker (stop()
// cancels by id).
constexpr quint64 kCompareIdBase = kCompareJobBit;

}  // namespace

QString format_compare_side(const CompareSide& s, bool speculative) {
  const QString sep = QStringLiteral(" \u00b7 ");
  QStringList parts;
  parts << CompareView::tr("TTFT %1 ms").arg(s.stats.ttft_ms, 0, 'f', 0)
        << CompareView::tr("%1 tok/s").arg(s.stats.tokens_per_s(), 0, 'f', 1)
        << CompareView::tr("total %1 s").arg(s.total_ms / 1000.0, 0, 'f', 2)
        << CompareView::tr("%1 tokens").arg(s.stats.n_generated);
  if (speculative && s.stats.n_drafted > 0) {
    parts << QStringLiteral("\u03b1 %1").arg(s.stats.acceptance_rate(), 0, 'f', 2)
          << QStringLiteral("\u03c4 %1").arg(s.stats.mean_accepted_length(), 0, 'f', 2);
  }
  return parts.join(sep);
}

QString format_compare_pipo_side(const CompareSide& s, const PipoLive& p) {
  const QString sep = QStringLiteral(" \u00b7 ");
  QStringList parts;
  parts << CompareView::tr("TTFT %1 ms").arg(s.stats.ttft_ms, 0, 'f', 0)
        << CompareView::tr("TPOT %1 ms").arg(p.tpot_ms, 0, 'f', 2)
        << CompareView::tr("%1 tok/s").arg(s.stats.tokens_per_s(), 0, 'f', 1)
        << CompareView::tr("total %1 s").arg(s.total_ms / 1000.0, 0, 'f', 2)
        << CompareView::tr("%1 tokens").arg(s.stats.n_generated)
        << CompareView::tr("token 2 kept %1").arg(p.acceptance_rate(), 0, 'f', 2)
        << CompareView::tr("%1 tokens/step").arg(p.tokens_per_step(), 0, 'f', 2);
  return parts.join(sep);
}

QString format_pipo_quality(const QString& quality_json, float threshold) {
  const nlohmann::json q = nlohmann::json::parse(quality_json.toStdString(), nullptr, false);
  if (!q.is_object() || q.empty()) return {};
  QStringList parts;
  // Numbers, booleans and short strings; long prose (how it was evaluated) stays in the manifest.
  auto add = [&parts](const std::string& key, const nlohmann::json& v) {
    const QString k = QString::fromStdString(key);
    if (v.is_number_float()) {
      parts << QStringLiteral("%1 %2").arg(k).arg(v.get<double>(), 0, 'g', 4);
    } else if (v.is_number() || v.is_boolean()) {
      parts << QStringLiteral("%1 %2").arg(k, QString::fromStdString(v.dump()));
    } else if (v.is_string() && v.get<std::string>().size() <= 40) {
      parts << QStringLiteral("%1 %2").arg(k, QString::fromStdString(v.get<std::string>()));
    }
  };
  // An object keyed by thresholds ("0.5", "0.85", ...): the entry nearest the one in force.
  auto nearest_threshold = [threshold](const nlohmann::json& o) -> const nlohmann::json* {
    const nlohmann::json* best = nullptr;
    double best_d = 0;
    for (auto it = o.begin(); it != o.end(); ++it) {
      bool ok = false;
      const double t = QString::fromStdString(it.key()).toDouble(&ok);
      if (!ok) return nullptr;
      const double d = std::abs(t - threshold);
      if (!best || d < best_d) best = &it.value(), best_d = d;
    }
    return best;
  };
  for (auto it = q.begin(); it != q.end(); ++it) {
    if (!it.value().is_object()) {
      add(it.key(), it.value());
    } else if (const nlohmann::json* at = nearest_threshold(it.value()); at && at->is_object()) {
      const std::string prefix = it.key() + "@" + QString::number(threshold, 'f', 2).toStdString() + ".";
      for (auto sub = at->begin(); sub != at->end(); ++sub) add(prefix + sub.key(), sub.value());
    } else {
      for (auto sub = it.value().begin(); sub != it.value().end(); ++sub) add(it.key() + "." + sub.key(), sub.value());
    }
  }
  return parts.join(QStringLiteral(" \u00b7 "));
}

QString format_speedup_decode(const CompareResult& r) {
  return CompareView::tr("speedup (decode) %1\u00d7").arg(r.speedup_decode, 0, 'f', 2);
}

QString format_total_time_ratio(const CompareResult& r) {
  return CompareView::tr("total-time ratio %1\u00d7").arg(r.total_time_ratio, 0, 'f', 2);
}

CompareView::CompareView(EngineWorker* worker, QWidget* parent)
    : QWidget(parent),
      worker_(worker),
      input_(new QPlainTextEdit),
      run_(new QPushButton(tr("Run"))),
      stop_(new QPushButton(tr("Stop"))),
      save_(new QPushButton(tr("Save"))),
      text_{new QPlainTextEdit, new QPlainTextEdit},
      stats_{new QLabel, new QLabel},
      speedup_(new QLabel),
      total_ratio_(new QLabel),
      verdict_(new QLabel),
      status_(new QLabel),
      header_(new QLabel),
      quality_(new QLabel) {
  setObjectName(QStringLiteral("compareView"));
  setWindowTitle(tr("Compare baseline and speculative"));
  input_->setObjectName(QStringLiteral("compareInput"));
  run_->setObjectName(QStringLiteral("compareRunButton"));
  stop_->setObjectName(QStringLiteral("compareStopButton"));
  save_->setObjectName(QStringLiteral("compareSaveButton"));
  text_[0]->setObjectName(QStringLiteral("compareBaselineText"));
  text_[1]->setObjectName(QStringLiteral("compareSpeculativeText"));
  stats_[0]->setObjectName(QStringLiteral("compareBaselineStats"));
  stats_[1]->setObjectName(QStringLiteral("compareSpeculativeStats"));
  speedup_->setObjectName(QStringLiteral("compareSpeedup"));
  total_ratio_->setObjectName(QStringLiteral("compareTotalTimeRatio"));
  verdict_->setObjectName(QStringLiteral("compareVerdict"));
  status_->setObjectName(QStringLiteral("compareStatus"));

  input_->setPlaceholderText(tr("Prompt to run twice: baseline, then speculative"));
  input_->setFixedHeight(QFontMetrics(input_->font()).lineSpacing() * 3 + 12);
  stop_->setToolTip(tr("Stop (Esc)"));
  save_->setToolTip(tr("Save this comparison to the database"));
  QFont big = speedup_->font();
  big.setPointSizeF(big.pointSizeF() * 1.5);
  big.setBold(true);
  speedup_->setFont(big);
  speedup_->setToolTip(tr("speedup_decode: speculative decode tokens/s over baseline decode tokens/s "
                          "(prefill excluded)"));
  total_ratio_->setToolTip(tr("total_time_ratio: baseline total time over speculative total time "
                              "(request start to last token, prefill included)"));
  status_->setWordWrap(true);
  for (int i = 0; i < 2; ++i) {
    text_[i]->setReadOnly(true);
    stats_[i]->setWordWrap(true);
    stats_[i]->setTextInteractionFlags(Qt::TextSelectableByMouse);
  }

  auto* top = new QHBoxLayout;
  top->addWidget(input_, 1);
  auto* buttons = new QVBoxLayout;
  buttons->addWidget(run_);
  buttons->addWidget(stop_);
  buttons->addStretch(1);
  top->addLayout(buttons);
  auto* grid = new QGridLayout;
  auto* head0 = new QLabel(tr("<b>Baseline</b> (target only)"));
  header_->setObjectName(QStringLiteral("compareSpeculativeHeader"));
  quality_->setObjectName(QStringLiteral("compareQuality"));
  quality_->setWordWrap(true);
  quality_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  quality_->setToolTip(tr("The held-out figures the PIPO release was gated on (its manifest's \"quality\")"));
  showMode(false);
  grid->addWidget(head0, 0, 0);
  grid->addWidget(header_, 0, 1);
  grid->addWidget(text_[0], 1, 0);
  grid->addWidget(text_[1], 1, 1);
  grid->addWidget(stats_[0], 2, 0);
  grid->addWidget(stats_[1], 2, 1);
  auto* verdict_row = new QHBoxLayout;
  verdict_row->addWidget(speedup_);
  verdict_row->addSpacing(16);
  verdict_row->addWidget(total_ratio_);
  verdict_row->addSpacing(16);
  verdict_row->addWidget(verdict_, 1);
  verdict_row->addWidget(save_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addLayout(grid, 1);
  layout->addLayout(verdict_row);
  layout->addWidget(quality_);
  layout->addWidget(status_);
  resize(900, 560);

  connect(run_, &QPushButton::clicked, this, &CompareView::run);
  connect(stop_, &QPushButton::clicked, this, &CompareView::stop);
  auto* esc = new QShortcut(QKeySequence(Qt::Key_Escape), this);
  esc->setContext(Qt::WidgetWithChildrenShortcut);
  connect(esc, &QShortcut::activated, this, &CompareView::stop);
  auto* go = new QShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return), this);
  go->setContext(Qt::WidgetWithChildrenShortcut);
  connect(go, &QShortcut::activated, this, &CompareView::run);
  connect(save_, &QPushButton::clicked, this, [this] {
    if (!has_result_ || !result_.error.isEmpty()) return;
    if (!isSignalConnected(QMetaMethod::fromSignal(&CompareView::saveRequested))) {
      status_->setText(tr("Saving comparisons is not available here (no database)."));
      return;
    }
    Q_EMIT saveRequested(to_compare_record(result_));
    status_->setText(tr("Comparison saved."));
    save_->setEnabled(false);  // once per run
  });
  if (worker_) {
    connect(this, &CompareView::compareRequested, worker_, &EngineWorker::compare, Qt::QueuedConnection);
    connect(worker_, &EngineWorker::compareToken, this, &CompareView::onToken, Qt::QueuedConnection);
    connect(worker_, &EngineWorker::compareFinished, this, &CompareView::onFinished, Qt::QueuedConnection);
  }
  setRunning(0);
}

void CompareView::setPrompt(const QString& text) { input_->setPlainText(text); }

void CompareView::showMode(bool pipo) {
  header_->setText(pipo ? tr("<b>PIPO</b> <span style=\"color:#b9770e\">(%1)</span>").arg(QString::fromUtf8(kPipoLabel))
                        : tr("<b>Speculative</b>"));
  setWindowTitle(pipo ? tr("Compare baseline and PIPO (approximate)") : tr("Compare baseline and speculative"));
  if (!pipo) quality_->hide();
}

QString CompareView::waitingText() { return tr("Waiting for the current reply to finish\u2026"); }

void CompareView::setChatBusy(bool busy) {
  chat_busy_ = busy;
  // The chat reply ended: the queued run starts now (its first token will confirm it).
  if (!busy && running_ != 0 && !started_ && status_->text() == waitingText()) {
    status_->setText(tr("Running baseline\u2026"));
  }
}

void CompareView::setRunning(quint64 job_id) {
  running_ = job_id;
  run_->setEnabled(job_id == 0);
  stop_->setEnabled(job_id != 0);
  save_->setEnabled(job_id == 0 && has_result_ && result_.error.isEmpty() && !result_.cancelled);
}

void CompareView::run() {
  if (running_ != 0 || !worker_) return;
  const QString prompt = input_->toPlainText();
  if (prompt.trimmed().isEmpty()) {
    status_->setText(tr("Type a prompt to compare."));
    return;
  }
  CompareJob job;
  job.id = kCompareIdBase + ++next_id_;
  job.conversation_id = conversation_id_;
  job.prompt = prompt;
  job.system_prompt = system_prompt_;
  job.settings = settings_;
  job.pipo = settings_.pipo.enabled;  // Settings › PIPO on: baseline vs PIPO
  if (job.settings.draft_k <= 0) job.settings.draft_k = GenerationSettings{}.draft_k;  // compare needs a drafter
  showMode(job.pipo);
  has_result_ = false;
  result_ = CompareResult{};
  for (int i = 0; i < 2; ++i) {
    text_[i]->clear();
    stats_[i]->clear();
  }
  speedup_->clear();
  total_ratio_->clear();
  verdict_->clear();
  verdict_->setStyleSheet(QString());
  started_ = false;
  status_->setText(chat_busy_ ? waitingText() : tr("Running baseline\u2026"));
  setRunning(job.id);
  Q_EMIT compareRequested(job);
}

void CompareView::stop() {
  if (running_ != 0 && worker_) worker_->stop(running_);
}

void CompareView::onToken(quint64 job_id, int side, const QString& text, bool) {
  if (job_id != running_ || side < 0 || side > 1) return;
  if (!started_) {
    started_ = true;
    if (side == 0) status_->setText(tr("Running baseline\u2026"));
  }
  if (side == 1 && text_[1]->document()->isEmpty()) {
    const bool pipo = header_->text().contains(QLatin1String("PIPO"));
    status_->setText(pipo ? tr("Running PIPO\u2026") : tr("Running speculative\u2026"));
  }
  QTextCursor c(text_[side]->document());
  c.movePosition(QTextCursor::End);
  c.insertText(text);
}

void CompareView::onFinished(const CompareResult& r) {
  if (r.job_id != running_) return;
  result_ = r;
  has_result_ = true;
  text_[0]->setPlainText(r.baseline.text);
  text_[1]->setPlainText(r.speculative.text);
  QStringList notes = r.warnings;
  if (!r.error.isEmpty()) {
    verdict_->setText(compare_verdict(r));
    verdict_->setStyleSheet(QStringLiteral("color: #c0392b;"));
    status_->setText(tr("Compare failed: %1").arg(r.error));
  } else if (r.cancelled) {
    verdict_->setText(tr("stopped"));
    status_->setText(tr("Stopped; the results are incomplete."));
  } else {
    stats_[0]->setText(format_compare_side(r.baseline, false));
    stats_[1]->setText(r.pipo ? format_compare_pipo_side(r.speculative, r.pipo_live)
                              : format_compare_side(r.speculative, true));
    speedup_->setText(format_speedup_decode(r));
    total_ratio_->setText(format_total_time_ratio(r));
    verdict_->setText(compare_verdict(r));
    const bool bad = r.greedy && !r.identical;
    // A lossless side that differs is a bug (red); PIPO may differ by design (amber).
    verdict_->setStyleSheet(!bad ? QStringLiteral("color: #1e8449;")
                            : r.pipo ? QStringLiteral("color: #b9770e;") : QStringLiteral("color: #c0392b;"));
    if (r.pipo) {
      notes.prepend(tr("PIPO release %1, threshold %2: %3.")
                        .arg(r.pipo_live.release)
                        .arg(r.pipo_live.threshold, 0, 'f', 2)
                        .arg(QString::fromUtf8(kPipoLabel)));
      const QString q = format_pipo_quality(r.pipo_quality_json, r.pipo_live.threshold);
      quality_->setText(q.isEmpty() ? tr("The release states no quality figures.") : tr("Release quality: %1").arg(q));
      quality_->show();
    } else {
      notes.prepend(tr("Speculative: %1, tree %2, budget %3.").arg(r.drafter, r.tree_mode).arg(r.node_budget));
    }
    status_->setText(notes.join(QLatin1Char(' ')));
  }
  setRunning(0);
  Q_EMIT finished(r);
}

}  // namespace specchat::ui

#include "ui/live_panel.h"

#include <QFormLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "ui/stat_charts.h"

namespace specchat::ui {

namespace {

QLabel* value_label(const char* name) {
  auto* l = new QLabel(QStringLiteral("\u2014"));
  l->setObjectName(QString::fromLatin1(name));
  l->setTextInteractionFlags(Qt::TextSelectableByMouse);
  return l;
}

QString colored_square(const QColor& c) {
  return QStringLiteral("<span style=\"color:%1\">\u25a0</span>").arg(c.name());
}

// "913&nbsp;ms", "4.82&nbsp;s" (non-breaking: the legend wraps between entries only).
QString format_ms(double ms) {
  if (ms >= 1000) return QStringLiteral("%1&nbsp;s").arg(ms / 1000.0, 0, 'f', 2);
  return QStringLiteral("%1&nbsp;ms").arg(ms, 0, 'f', ms < 10 ? 1 : 0);
}

}  // namespace

QString format_bytes(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return QStringLiteral("%1 GiB").arg(b / (1024.0 * 1024 * 1024), 0, 'f', 2);
  if (b >= 1024.0 * 1024) return QStringLiteral("%1 MiB").arg(b / (1024.0 * 1024), 0, 'f', 1);
  if (b >= 1024.0) return QStringLiteral("%1 KiB").arg(b / 1024.0, 0, 'f', 1);
  return QStringLiteral("%1 B").arg(bytes);
}

LivePanel::LivePanel(QWidget* parent)
    : QWidget(parent),
      tps_(value_label("liveTokensPerS")),
      spark_(new Sparkline),
      alpha_(value_label("liveAlpha")),
      tau_(value_label("liveTau")),
      hist_(new Histogram),
      counts_(value_label("liveCounts")),
      split_bar_(new SplitBar),
      split_(value_label("liveSplit")),
      memory_(value_label("liveMemory")),
      kv_(value_label("liveKv")),
      drafter_(value_label("liveDrafter")),
      tree_(value_label("liveTree")),
      state_(value_label("liveState")),
      pipo_box_(new QWidget),
      pipo_label_(value_label("livePipoLabel")),
      pipo_release_(value_label("livePipoRelease")),
      pipo_acceptance_(value_label("livePipoAcceptance")),
      pipo_tps_(value_label("livePipoTokensPerStep")),
      pipo_length_(value_label("livePipoLength")),
      pipo_timing_(value_label("livePipoTiming")),
      pipo_cache_(value_label("livePipoCache")),
      pipo_fidelity_(value_label("livePipoFidelity")) {
  setObjectName(QStringLiteral("livePanel"));
  spark_->setObjectName(QStringLiteral("liveSparkline"));
  hist_->setObjectName(QStringLiteral("liveHistogram"));
  split_bar_->setObjectName(QStringLiteral("liveSplitBar"));
  QFont big = tps_->font();
  big.setPointSizeF(big.pointSizeF() * 1.6);
  big.setBold(true);
  tps_->setFont(big);
  split_->setTextFormat(Qt::RichText);
  split_->setWordWrap(true);
  tree_->setWordWrap(true);  // "dynamic · budget 16 · depth 4 · branch 2" is wider than the panel
  QPalette dim = state_->palette();
  dim.setColor(QPalette::WindowText, dim.color(QPalette::PlaceholderText));
  state_->setPalette(dim);
  hist_->setToolTip(tr("Verification steps by number of accepted draft tokens"));
  spark_->setToolTip(tr("Decode tokens/s after each token of the reply"));

  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  form->addRow(tr("Acceptance \u03b1"), alpha_);
  form->addRow(tr("Mean accepted \u03c4"), tau_);
  form->addRow(QString(), hist_);
  // "Proposed" = draft tokens the drafter offered, "accepted" = those the target kept: α is
  // accepted / proposed, the same counts the status bar's "from accepted drafts" refers to.
  form->addRow(tr("Proposed / accepted"), counts_);
  counts_->setToolTip(tr("Draft tokens proposed by the drafter / accepted by the target (\u03b1 = accepted / proposed)"));
  alpha_->setToolTip(tr("Acceptance rate \u03b1: the share of proposed draft tokens the target accepted"));
  tau_->setToolTip(tr("Mean accepted length \u03c4: tokens emitted per target verification step"));
  form->addRow(tr("Time split"), split_bar_);
  form->addRow(QString(), split_);
  form->addRow(tr("Memory"), memory_);
  form->addRow(tr("KV cache"), kv_);
  form->addRow(tr("Drafter"), drafter_);
  form->addRow(tr("Tree"), tree_);

  // PIPO (approximate): its own figures (docs/design/pipo.md, "Monitoring").
  pipo_box_->setObjectName(QStringLiteral("livePipoBox"));
  pipo_label_->setText(QString::fromUtf8(kPipoLabel));
  pipo_label_->setStyleSheet(QStringLiteral("color: #b9770e; font-weight: bold;"));
  pipo_label_->setWordWrap(true);
  pipo_length_->setWordWrap(true);
  pipo_timing_->setWordWrap(true);
  pipo_acceptance_->setToolTip(tr("Steps whose second token the confidence head kept, of the steps that ran the MTP head"));
  pipo_tps_->setToolTip(tr("Tokens emitted per decode step (1 to 2)"));
  pipo_length_->setToolTip(tr("Pairs the backbone's KV cache holds for the conversation, against the tokens they stand for"));
  pipo_cache_->setToolTip(tr("Prompt pairs kept in the backbone's KV cache from the previous turn, and whether the "
                             "turn continued the stored latents"));
  auto* pf = new QFormLayout(pipo_box_);
  pf->setContentsMargins(0, 0, 0, 0);
  pf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  pf->addRow(pipo_label_);
  pf->addRow(tr("Release"), pipo_release_);
  pf->addRow(tr("Token 2 kept"), pipo_acceptance_);
  pf->addRow(tr("Tokens / step"), pipo_tps_);
  pf->addRow(tr("Latent / raw"), pipo_length_);
  pf->addRow(tr("TTFT / TPOT"), pipo_timing_);
  pf->addRow(tr("Cache"), pipo_cache_);
  pipo_fidelity_->setWordWrap(true);
  pipo_fidelity_->setToolTip(tr("KL(plain target ‖ PIPO) of token 1, sampled on 1 step in N (Settings › PIPO › "
                                "Fidelity gauge): how far PIPO's first token is from what the target alone would say"));
  pf->addRow(tr("Fidelity"), pipo_fidelity_);
  pipo_box_->hide();

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(state_);
  layout->addWidget(tps_);
  layout->addWidget(spark_);
  layout->addWidget(pipo_box_);
  layout->addLayout(form);
  layout->addStretch(1);
  setMinimumWidth(240);
  clear();
}

void LivePanel::clear() {
  stats_ = LiveStats{};
  updates_ = 0;
  for (QLabel* l : {tps_, alpha_, tau_, counts_, split_, memory_, kv_, drafter_, tree_}) l->setText(QStringLiteral("\u2014"));
  state_->setText(tr("No reply yet"));
  spark_->setValues({});
  hist_->setCounts({});
  split_bar_->setParts({});
  pipo_box_->hide();
}

void LivePanel::setStats(const LiveStats& s) {
  stats_ = s;
  ++updates_;
  const GenerationStats& g = s.stats;
  state_->setText(s.finished ? tr("Last reply \u00b7 %1 tokens \u00b7 %2 s").arg(g.n_generated).arg(s.elapsed_ms / 1000.0, 0, 'f', 1)
                             : tr("Generating\u2026 %1 tokens").arg(g.n_generated));
  tps_->setText(tr("%1 tok/s").arg(g.tokens_per_s(), 0, 'f', 1));
  spark_->setValues(s.tps_history);
  if (s.speculative) {
    alpha_->setText(QString::number(g.acceptance_rate(), 'f', 2));
    tau_->setText(QString::number(g.mean_accepted_length(), 'f', 2));
    counts_->setText(tr("%1 / %2 in %3 steps").arg(g.n_drafted).arg(g.n_accepted).arg(g.n_steps));
  } else {
    alpha_->setText(tr("\u2014 (baseline)"));
    tau_->setText(QStringLiteral("1.00"));
    counts_->setText(tr("0 / 0 in %1 steps").arg(g.n_steps));
  }
  hist_->setCounts(g.accepted_hist);
  split_bar_->setParts({g.draft_ms, g.verify_ms, g.sample_ms});
  // One legend entry per line-breakable chunk, so a narrow panel wraps between entries.
  split_->setText(tr("%1&nbsp;draft&nbsp;%2 %3&nbsp;verify&nbsp;%4 %5&nbsp;sampling&nbsp;%6")
                      .arg(colored_square(SplitBar::partColor(0)), format_ms(g.draft_ms),
                           colored_square(SplitBar::partColor(1)), format_ms(g.verify_ms),
                           colored_square(SplitBar::partColor(2)), format_ms(g.sample_ms)));
  if (s.vram_total_bytes > 0) {
    memory_->setText(tr("VRAM %1 / %2").arg(format_bytes(s.vram_used_bytes), format_bytes(s.vram_total_bytes)));
  } else {
    memory_->setText(tr("RSS %1 (%2)").arg(format_bytes(s.rss_bytes), s.device.isEmpty() ? tr("CPU") : s.device));
  }
  kv_->setText(format_bytes(s.kv_bytes));
  drafter_->setText(s.drafter.isEmpty() ? tr("none") : s.drafter);
  state_->setToolTip(s.warnings.join(QLatin1Char('\n')));
  if (!s.warnings.isEmpty()) state_->setText(state_->text() + QStringLiteral(" \u26a0"));
  tree_->setText(s.speculative ? tr("%1 \u00b7 budget %2 \u00b7 depth %3").arg(s.tree_mode).arg(s.node_budget).arg(s.tree_depth)
                               : tr("none"));
  setPipo(s);
}

void LivePanel::setPipo(const LiveStats& s) {
  pipo_box_->setVisible(s.pipo);
  if (!s.pipo) return;
  const PipoLive& p = s.pipo_live;
  // The lossless rows do not apply: nothing was verified.
  alpha_->setText(tr("\u2014 (PIPO)"));
  tau_->setText(tr("\u2014 (PIPO)"));
  counts_->setText(tr("%1 steps, %2 ran the MTP head").arg(p.steps).arg(p.head_runs));
  tree_->setText(tr("none"));
  tps_->setText(tr("%1 tok/s").arg(p.tokens_per_s(), 0, 'f', 1));
  pipo_release_->setText(p.release.isEmpty() ? tr("\u2014") : p.release);
  pipo_acceptance_->setText(tr("%1 (%2 / %3) \u00b7 threshold %4")
                                .arg(p.acceptance_rate(), 0, 'f', 2)
                                .arg(p.accepted)
                                .arg(p.head_runs)
                                .arg(p.threshold, 0, 'f', 2));
  pipo_tps_->setText(QString::number(p.tokens_per_step(), 'f', 2));
  const double ratio = p.latent_length > 0 ? static_cast<double>(p.raw_length) / p.latent_length : 0.0;
  pipo_length_->setText(tr("%1 pairs / %2 tokens (%3\u00d7) \u00b7 limits %4 / %5")
                            .arg(p.latent_length)
                            .arg(p.raw_length)
                            .arg(ratio, 0, 'f', 2)
                            .arg(p.latent_context)
                            .arg(p.raw_context));
  QString timing = tr("%1 / %2").arg(format_ms(p.ttft_ms), format_ms(p.tpot_ms));
  pipo_timing_->setText(timing.replace(QStringLiteral("&nbsp;"), QStringLiteral(" ")));
  pipo_cache_->setText(tr("%1 of %2 prompt pairs reused \u00b7 %3")
                           .arg(p.reused_pairs)
                           .arg(p.prompt_pairs)
                           .arg(p.from_latents ? tr("continued the stored latents") : tr("prefilled in pairs")));
  if (p.fidelity_every <= 0) {
    pipo_fidelity_->setText(tr("off"));
  } else if (p.fidelity_samples == 0) {
    pipo_fidelity_->setText(tr("no sample yet (1 step in %1)").arg(p.fidelity_every));
  } else {
    pipo_fidelity_->setText(tr("KL %1 nats mean, %2 max (%3 samples, 1 step in %4)")
                                .arg(p.fidelity_mean_kl, 0, 'f', 3)
                                .arg(p.fidelity_max_kl, 0, 'f', 3)
                                .arg(p.fidelity_samples)
                                .arg(p.fidelity_every));
  }
}

}  // namespace specchat::ui

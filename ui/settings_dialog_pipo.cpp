// Settings › PIPO (settings_dialog.h): the approximate dual-end decode mode (docs/design/pipo.md).
// Off by default; the switch says "approximate: not verified by the target" beside it.
#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

#include <algorithm>

#include "ui/file_dialogs.h"
#include "ui/settings_dialog.h"

namespace specchat::ui {

namespace {

// The threshold spin's lowest value: shown as "release default (…)" and read as -1.
constexpr double kReleaseDefault = -0.05;

}  // namespace

QGroupBox* SettingsDialog::buildPipo(const PipoChoice& c) {
  auto* box = new QGroupBox(tr("PIPO (approximate)"));
  box->setObjectName(QStringLiteral("pipoGroup"));
  auto* form = new QFormLayout(box);
  pipo_enabled_ = new QCheckBox(tr("Use PIPO for replies"));
  pipo_enabled_->setObjectName(QStringLiteral("pipoEnableCheck"));
  pipo_enabled_->setChecked(c.enabled);
  pipo_enabled_->setToolTip(tr("PIPO decodes pairs of tokens with a fine-tuned copy of the target: the second token "
                               "of each step comes from an MTP head and is kept when a confidence head trusts it. "
                               "Nothing checks it against the target, so replies can differ from what the target "
                               "alone would write. Off by default."));
  auto* label = new QLabel(QString::fromUtf8(kPipoLabel));
  label->setObjectName(QStringLiteral("pipoLabel"));
  label->setStyleSheet(QStringLiteral("color: #b9770e;"));
  auto* switch_row = new QHBoxLayout;
  switch_row->addWidget(pipo_enabled_);
  switch_row->addWidget(label, 1);
  form->addRow(switch_row);

  pipo_release_ = new QLineEdit(c.release);
  pipo_release_->setObjectName(QStringLiteral("pipoReleaseEdit"));
  const QString bundled = bundled_pipo_release();
  pipo_release_->setPlaceholderText(bundled.isEmpty() ? tr("none bundled: choose a release folder") : tr("bundled release"));
  pipo_release_->setToolTip(tr("A PIPO release folder (pipo.json with backbone.gguf, mtp.gguf and io.gguf), made from "
                               "the target model loaded above"));
  auto* browse = new QPushButton(tr("Browse\u2026"));
  browse->setObjectName(QStringLiteral("pipoBrowseButton"));
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString dir = existing_directory(this, tr("PIPO release folder"), pipo_release_->text());
    if (!dir.isEmpty()) {
      pipo_release_->setText(dir);
      updatePipoInfo();
    }
  });
  auto* release_row = new QHBoxLayout;
  release_row->addWidget(pipo_release_, 1);
  release_row->addWidget(browse);
  form->addRow(tr("Release:"), release_row);
  pipo_info_ = new QLabel;
  pipo_info_->setObjectName(QStringLiteral("pipoReleaseInfo"));
  pipo_info_->setWordWrap(true);
  form->addRow(QString(), pipo_info_);

  pipo_threshold_ = new QDoubleSpinBox;
  pipo_threshold_->setObjectName(QStringLiteral("pipoThresholdSpin"));
  pipo_threshold_->setRange(kReleaseDefault, 1.0);
  pipo_threshold_->setSingleStep(0.05);
  pipo_threshold_->setDecimals(2);
  pipo_threshold_->setValue(c.threshold < 0 ? kReleaseDefault : std::clamp(static_cast<double>(c.threshold), 0.0, 1.0));
  pipo_threshold_->setToolTip(tr("Keep the second token of a step when the confidence head says at least this (0 = "
                                 "always, 1 = never: one token per step). Lowest value: the release's recommendation."));
  form->addRow(tr("Acceptance threshold:"), pipo_threshold_);
  auto* pair = new QLabel(tr("2 (fixed)"));
  pair->setObjectName(QStringLiteral("pipoPairSize"));
  pair->setToolTip(tr("Tokens per latent: the compressor folds each pair of tokens into one"));
  form->addRow(tr("Pair size:"), pair);
  auto* extra = new QLabel(tr("1 (fixed)"));
  extra->setObjectName(QStringLiteral("pipoExtraTokens"));
  extra->setToolTip(tr("Tokens the MTP head adds per step"));
  form->addRow(tr("Extra draft tokens:"), extra);
  pipo_raw_context_ = new QSpinBox;
  pipo_raw_context_->setObjectName(QStringLiteral("pipoRawContextSpin"));
  pipo_raw_context_->setRange(0, 16 * 1024 * 1024);
  pipo_raw_context_->setSingleStep(256);
  pipo_raw_context_->setSpecialValueText(tr("the target's context"));
  pipo_raw_context_->setValue(c.raw_context);
  pipo_raw_context_->setToolTip(tr("The conversation's limit in tokens. The backbone's cache holds pairs, so a step "
                                   "that keeps one token spends a whole pair on it"));
  form->addRow(tr("Context (raw tokens):"), pipo_raw_context_);
  pipo_fidelity_ = new QSpinBox;
  pipo_fidelity_->setObjectName(QStringLiteral("pipoFidelitySpin"));
  pipo_fidelity_->setRange(0, 1000000);
  pipo_fidelity_->setSpecialValueText(tr("off"));
  pipo_fidelity_->setPrefix(tr("1 step in "));
  pipo_fidelity_->setValue(c.fidelity_every);
  pipo_fidelity_->setToolTip(tr("Fidelity gauge: on 1 step in N, the KL of token 1 against the plain target, shown in "
                                "the live panel. Loads a second copy of the target"));
  form->addRow(tr("Fidelity gauge:"), pipo_fidelity_);
  pipo_latent_ = new QLabel;
  pipo_latent_->setObjectName(QStringLiteral("pipoLatentLabel"));
  pipo_latent_->setWordWrap(true);
  form->addRow(tr("Latent limit:"), pipo_latent_);

  connect(pipo_enabled_, &QCheckBox::toggled, this, &SettingsDialog::updateEnabled);
  connect(pipo_release_, &QLineEdit::editingFinished, this, &SettingsDialog::updatePipoInfo);
  connect(pipo_raw_context_, &QSpinBox::valueChanged, this, &SettingsDialog::updatePipoInfo);
  updatePipoInfo();
  updateEnabled();
  return box;
}

void SettingsDialog::updatePipoInfo() {
  PipoChoice c;
  c.release = pipo_release_->text().trimmed();
  const QString folder = pipo_release_folder(c);
  const PipoManifestSummary m = read_pipo_manifest(folder);
  pipo_backbone_ctx_ = m.ok ? m.backbone_context : 0;
  if (m.ok) {
    pipo_info_->setText(tr("Release %1 \u00b7 recommended threshold %2").arg(m.release).arg(m.recommended_threshold, 0, 'f', 2));
    pipo_info_->setStyleSheet(QString());
    pipo_threshold_->setSpecialValueText(tr("release default (%1)").arg(m.recommended_threshold, 0, 'f', 2));
  } else {
    pipo_info_->setText(m.error);
    pipo_info_->setStyleSheet(QStringLiteral("color: #c0392b;"));
    pipo_threshold_->setSpecialValueText(tr("release default"));
  }
  // Pairs the backbone's KV cache holds: min(its context, the raw limit).
  const int raw = pipo_raw_context_->value();
  const QString backbone = pipo_backbone_ctx_ > 0 ? QString::number(pipo_backbone_ctx_) : tr("?");
  if (raw > 0 && pipo_backbone_ctx_ > 0) {
    pipo_latent_->setText(tr("%1 pairs (min of the backbone's %2 and %3 raw tokens)")
                              .arg(std::min(raw, pipo_backbone_ctx_))
                              .arg(pipo_backbone_ctx_)
                              .arg(raw));
  } else {
    pipo_latent_->setText(tr("min(the backbone's %1, the raw limit) pairs").arg(backbone));
  }
}

void SettingsDialog::readPipo(AppSettings& s) const {
  PipoChoice& c = s.generation.pipo;
  c.enabled = pipo_enabled_->isChecked();
  c.release = pipo_release_->text().trimmed();
  const double t = pipo_threshold_->value();
  c.threshold = t < 0 ? -1.0f : static_cast<float>(t);
  c.raw_context = pipo_raw_context_->value();
  c.fidelity_every = pipo_fidelity_->value();
}

}  // namespace specchat::ui

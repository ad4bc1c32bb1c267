// The Settings dialog: target and draft GGUF files, drafter and tree options, sampling, theme.
// Accepting checks the model pair's vocabularies first (check_model_files) and, on a mismatch
// or an unreadable file, explains it in the dialog (label "modelCheckLabel") and stays open
// instead of handing an unloadable pair to the engine. Widgets have object names for tests:
// targetPathEdit, draftPathEdit, targetBrowseButton, draftBrowseButton, drafterCombo,
// treeModeCombo, draftKSpin, nodeBudgetSpin, depthSpin, branchSpin, temperatureSpin, topKSpin,
// topPSpin, pinSeedCheck, seedSpin, maxTokensSpin, themeCombo, modelCheckLabel,
// chatTemplateCombo, and for Settings › Engine remoteUrlEdit, remoteKeyEdit, remoteModelEdit (an empty URL = the local
// engine; a URL that is not http(s)://host... is explained in modelCheckLabel), and for Settings ›
// Server serverEnableCheck, serverHostEdit, serverPortSpin, serverKeyEdit, serverParallelSpin (an
// address other than loopback without a key is explained in modelCheckLabel), and for Settings ›
// PIPO (settings_dialog_pipo.cpp; approximate, off by default) pipoEnableCheck, pipoLabel ("approximate:
// not verified by the target", next to the switch), pipoReleaseEdit, pipoBrowseButton,
// pipoReleaseInfo (the manifest's release and recommended threshold, or why it cannot be read),
// pipoThresholdSpin (below 0 = the release's recommended threshold), pipoPairSize and
// pipoExtraTokens (fixed 2 and 1), pipoRawContextSpin (0 = the target's context) and
// pipoLatentLabel (the derived latent limit). An enabled PIPO whose manifest cannot be read is
// explained in modelCheckLabel.
#pragma once

#include <QDialog>

#include "ui/settings.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QGroupBox;
class QSpinBox;

namespace specchat::ui {

class SettingsDialog : public QDialog {
  Q_OBJECT

 public:
  explicit SettingsDialog(const AppSettings& current, QWidget* parent = nullptr);

  // The values shown now (valid after accept, or at any time for tests); settings the dialog
  // does not show (the model library's folders and recent models) are those it opened with.
  AppSettings settings() const;

 public Q_SLOTS:
  // Runs the model check; accepts the dialog only when the pair can be loaded.
  void accept() override;

 private:
  void browse(QLineEdit* edit, const QString& caption);
  // Enables only the fields the chosen drafter, tree mode and temperature use.
  void updateEnabled();
  // Settings › PIPO (settings_dialog_pipo.cpp): builds the group; refreshes the release line and
  // the derived latent limit from the folder's manifest; reads the fields into `s`.
  QGroupBox* buildPipo(const PipoChoice& c);
  void updatePipoInfo();
  void readPipo(AppSettings& s) const;

  AppSettings current_;  // the settings it opened with
  QLineEdit* target_;
  QLineEdit* draft_;
  QComboBox* drafter_;
  QComboBox* tree_mode_;
  QSpinBox* draft_k_;
  QSpinBox* node_budget_;
  QSpinBox* depth_;
  QSpinBox* branch_;
  QDoubleSpinBox* temperature_;
  QSpinBox* top_k_;
  QDoubleSpinBox* top_p_;
  QCheckBox* pin_seed_;  // seed_ is used (and enabled) only when checked
  QSpinBox* seed_;
  QSpinBox* max_tokens_;
  QComboBox* theme_;
  QComboBox* chat_template_;
  QComboBox* kv_type_;
  QComboBox* activations_;
  QLineEdit* remote_url_;
  QLineEdit* remote_key_;
  QLineEdit* remote_model_;
  QCheckBox* server_enabled_;
  QLineEdit* server_host_;
  QSpinBox* server_port_;
  QLineEdit* server_key_;
  QSpinBox* server_parallel_;
  QCheckBox* pipo_enabled_ = nullptr;
  QLineEdit* pipo_release_ = nullptr;
  QLabel* pipo_info_ = nullptr;
  QDoubleSpinBox* pipo_threshold_ = nullptr;
  QSpinBox* pipo_raw_context_ = nullptr;
  QSpinBox* pipo_fidelity_ = nullptr;
  QLabel* pipo_latent_ = nullptr;
  int pipo_backbone_ctx_ = 0;  // from the manifest's backbone header (0 = unknown)
  QLabel* check_;
};

}  // namespace specchat::ui

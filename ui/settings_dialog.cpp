#include "ui/file_dialogs.h"
#include "ui/settings_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <limits>

#include "app/remote/openai_client.h"
#include "ui/local_server.h"
#include "ui/model_check.h"

namespace specchat::ui {

namespace {

QSpinBox* spin(const char* name, int lo, int hi, int value) {
  auto* s = new QSpinBox;
  s->setObjectName(QLatin1String(name));
  s->setRange(lo, hi);
  s->setValue(value);
  return s;
}

QDoubleSpinBox* dspin(const char* name, double lo, double hi, double step, double value) {
  auto* s = new QDoubleSpinBox;
  s->setObjectName(QLatin1String(name));
  s->setRange(lo, hi);
  s->setSingleStep(step);
  s->setDecimals(2);
  s->setValue(value);
  return s;
}

}  // namespace

SettingsDialog::SettingsDialog(const AppSettings& current, QWidget* parent)
    : QDialog(parent),
      current_(current),
      target_(new QLineEdit(current.target_path)),
      draft_(new QLineEdit(current.draft_path)),
      drafter_(new QComboBox),
      tree_mode_(new QComboBox),
      draft_k_(spin("draftKSpin", 1, 64, current.generation.draft_k > 0 ? current.generation.draft_k : GenerationSettings{}.draft_k)),
      node_budget_(spin("nodeBudgetSpin", 1, 1024, current.generation.node_budget)),
      depth_(spin("depthSpin", 1, 64, current.generation.tree_depth)),
      branch_(spin("branchSpin", 1, 16, current.generation.tree_branch)),
      temperature_(dspin("temperatureSpin", 0, 5, 0.1, current.generation.sampling.temperature)),
      top_k_(spin("topKSpin", 0, 1000000, current.generation.sampling.top_k)),
      top_p_(dspin("topPSpin", 0, 1, 0.05, current.generation.sampling.top_p)),
      pin_seed_(new QCheckBox(tr("Pin"))),
      // QSpinBox holds an int: seeds above 2^31 - 1 are shown clamped (the CLI takes any u64).
      seed_(spin("seedSpin", 0, std::numeric_limits<int>::max(),
                 static_cast<int>(std::min<uint64_t>(current.generation.sampling.seed,
                                                     static_cast<uint64_t>(std::numeric_limits<int>::max()))))),
      max_tokens_(spin("maxTokensSpin", 1, 1000000, current.generation.max_tokens)),
      theme_(new QComboBox),
      chat_template_(new QComboBox),
      kv_type_(new QComboBox),
      activations_(new QComboBox),
      remote_url_(new QLineEdit(current.engine.url)),
      remote_key_(new QLineEdit(current.engine.key)),
      remote_model_(new QLineEdit(current.engine.model)),
      server_enabled_(new QCheckBox(tr("Serve these models (OpenAI API)"))),
      server_host_(new QLineEdit(current.server.host)),
      server_port_(spin("serverPortSpin", 0, 65535, current.server.port)),
      server_key_(new QLineEdit(current.server.key)),
      server_parallel_(spin("serverParallelSpin", 1, 16, current.server.parallel)),
      check_(new QLabel) {
  setObjectName(QStringLiteral("settingsDialog"));
  setWindowTitle(tr("Settings"));
  setMinimumWidth(640);  // Engine and Server share a row: room for their fields' hints
  target_->setObjectName(QStringLiteral("targetPathEdit"));
  draft_->setObjectName(QStringLiteral("draftPathEdit"));
  target_->setPlaceholderText(tr("bundled model"));
  // An empty draft means the bundled draft when the target is the bundled model, else none.
  draft_->setPlaceholderText(tr("bundled draft with the bundled target, else none"));
  drafter_->setObjectName(QStringLiteral("drafterCombo"));
  drafter_->addItem(tr("Draft model"), QStringLiteral("model"));
  drafter_->addItem(tr("N-gram (prompt lookup)"), QStringLiteral("ngram"));
  drafter_->addItem(tr("None (baseline)"), QStringLiteral("none"));
  drafter_->addItem(tr("Block drafter (DFlash)"), QStringLiteral("block"));
  drafter_->addItem(tr("MTP head"), QStringLiteral("mtp"));
  const GenerationSettings& g = current.generation;
  drafter_->setCurrentIndex(g.draft_k <= 0                      ? 2
                            : g.drafter == DrafterKind::ngram ? 1
                            : g.drafter == DrafterKind::block ? 3
                            : g.drafter == DrafterKind::mtp   ? 4
                                                              : 0);
  tree_mode_->setObjectName(QStringLiteral("treeModeCombo"));
  tree_mode_->addItem(tr("Chain"), QStringLiteral("chain"));
  tree_mode_->addItem(tr("Dynamic tree (EAGLE-2)"), QStringLiteral("dynamic"));
  tree_mode_->addItem(tr("Optimal tree (Sequoia)"), QStringLiteral("optimal"));
  tree_mode_->addItem(tr("Auto (chosen from the calibration)"), QStringLiteral("auto"));
  tree_mode_->setCurrentIndex(g.auto_tree ? tree_mode_->findData(QStringLiteral("auto"))
                                          : tree_mode_->findData(QString::fromUtf8(tree_mode_name(g.tree_mode))));
  theme_->setObjectName(QStringLiteral("themeCombo"));
  theme_->addItem(tr("System"), QStringLiteral("system"));
  theme_->addItem(tr("Light"), QStringLiteral("light"));
  theme_->addItem(tr("Dark"), QStringLiteral("dark"));
  theme_->setCurrentIndex(std::max(0, theme_->findData(current.theme)));
  check_->setObjectName(QStringLiteral("modelCheckLabel"));
  check_->setWordWrap(true);
  check_->setMinimumWidth(420);  // wrapped explanations need a width to grow in height
  check_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto path_row = [this](QLineEdit* edit, const char* button_name, const QString& caption) {
    auto* row = new QHBoxLayout;
    auto* browse_button = new QPushButton(tr("Browse\u2026"));
    browse_button->setObjectName(QLatin1String(button_name));
    row->addWidget(edit, 1);
    row->addWidget(browse_button);
    connect(browse_button, &QPushButton::clicked, this, [this, edit, caption] { browse(edit, caption); });
    return row;
  };
  auto* models = new QGroupBox(tr("Models"));
  auto* mf = new QFormLayout(models);
  mf->addRow(tr("Target:"), path_row(target_, "targetBrowseButton", tr("Target model")));
  mf->addRow(tr("Draft:"), path_row(draft_, "draftBrowseButton", tr("Draft model")));
  chat_template_->setObjectName(QStringLiteral("chatTemplateCombo"));
  chat_template_->addItem(tr("From the model file"), QString());
  for (const std::string& name : chat_template_names()) {
    chat_template_->addItem(QString::fromStdString(name), QString::fromStdString(name));
  }
  chat_template_->setCurrentIndex(std::max(0, chat_template_->findData(current.chat_template)));
  chat_template_->setToolTip(tr("How turns are written for the model: the template named in the model file, or one "
                                "you pick when the file has none SpecChat recognises (ChatML is used then, with a notice)"));
  mf->addRow(tr("Chat template:"), chat_template_);
  kv_type_->setObjectName(QStringLiteral("kvTypeCombo"));
  kv_type_->addItem(tr("F16 (half the memory)"), QStringLiteral("f16"));
  kv_type_->addItem(tr("F32"), QStringLiteral("f32"));
  kv_type_->setCurrentIndex(std::max(0, kv_type_->findData(current.kv_type)));
  kv_type_->setToolTip(tr("Element type of the KV cache (the CLI's --kv-type); changing it reloads the models"));
  mf->addRow(tr("KV cache:"), kv_type_);
  activations_->setObjectName(QStringLiteral("activationsCombo"));
  activations_->addItem(tr("8-bit activations (fastest)"), QStringLiteral("q8"));
  activations_->addItem(tr("F32 activations (unrounded, slower)"), QStringLiteral("f32"));
  activations_->setCurrentIndex(std::max(0, activations_->findData(current.activations)));
  activations_->setToolTip(tr("How quantized models (Q8_0, Q4_K, ...) multiply on the CPU: activations rounded to 8 bits "
                              "(a scale per 32 values, per 256 for the K types) with integer dot products (llama.cpp's accuracy), or kept in f32 (the "
                              "CLI's --activations). F16 models and the GPU never round. Changing it reloads the models"));
  mf->addRow(tr("Quantized matrices:"), activations_);
  mf->addRow(check_);

  auto* spec = new QGroupBox(tr("Speculative decoding"));
  auto* sf = new QFormLayout(spec);
  sf->addRow(tr("Drafter:"), drafter_);
  sf->addRow(tr("Tree:"), tree_mode_);
  sf->addRow(tr("Draft tokens per step (k):"), draft_k_);
  sf->addRow(tr("Node budget:"), node_budget_);
  sf->addRow(tr("Depth:"), depth_);
  sf->addRow(tr("Branching:"), branch_);

  auto* sampling = new QGroupBox(tr("Sampling"));
  auto* pf = new QFormLayout(sampling);
  pf->addRow(tr("Temperature (0 = greedy):"), temperature_);
  pf->addRow(tr("Top-k (0 = off):"), top_k_);
  pf->addRow(tr("Top-p (1 = off):"), top_p_);
  pin_seed_->setObjectName(QStringLiteral("pinSeedCheck"));
  pin_seed_->setChecked(g.pin_seed);
  pin_seed_->setToolTip(tr("Use this seed for every reply. Unpinned, each reply at temperature > 0 gets a "
                           "fresh seed, stored with the reply so it can be reproduced."));
  auto* seed_row = new QHBoxLayout;
  seed_row->addWidget(pin_seed_);
  seed_row->addWidget(seed_, 1);
  pf->addRow(tr("Seed:"), seed_row);
  pf->addRow(tr("Max tokens per reply:"), max_tokens_);

  auto* engine = new QGroupBox(tr("Engine"));
  auto* ef = new QFormLayout(engine);
  remote_url_->setObjectName(QStringLiteral("remoteUrlEdit"));
  remote_url_->setPlaceholderText(tr("empty: this computer's engine"));
  remote_url_->setToolTip(tr("An OpenAI-compatible server (specchat-cli serve, llama-server, vLLM, SGLang, ...) "
                             "that replies come from instead, e.g. http://127.0.0.1:8080/v1"));
  remote_key_->setObjectName(QStringLiteral("remoteKeyEdit"));
  remote_key_->setEchoMode(QLineEdit::Password);
  remote_key_->setPlaceholderText(tr("none, or $SPECCHAT_API_KEY"));
  remote_model_->setObjectName(QStringLiteral("remoteModelEdit"));
  remote_model_->setPlaceholderText(tr("the server's default"));
  ef->addRow(tr("Server URL:"), remote_url_);
  ef->addRow(tr("API key:"), remote_key_);
  ef->addRow(tr("Model name:"), remote_model_);

  auto* server = new QGroupBox(tr("Server"));
  auto* svf = new QFormLayout(server);
  server_enabled_->setObjectName(QStringLiteral("serverEnableCheck"));
  server_enabled_->setChecked(current.server.enabled);
  server_enabled_->setToolTip(tr("Other programs (editors, scripts, chat front ends) can use the models this window "
                                 "has loaded at http://ADDRESS:PORT/v1, as with specchat-cli serve. The chat and the "
                                 "server share the models and take turns; each request gets its own KV cache."));
  server_host_->setObjectName(QStringLiteral("serverHostEdit"));
  server_host_->setToolTip(tr("127.0.0.1 = this computer only. Any other address (0.0.0.0 = every network) needs "
                              "an API key."));
  server_port_->setToolTip(tr("0 = any free port (the status bar shows which)"));
  server_key_->setObjectName(QStringLiteral("serverKeyEdit"));
  server_key_->setEchoMode(QLineEdit::Password);
  server_key_->setPlaceholderText(tr("none (loopback only), or $SPECCHAT_API_KEY"));
  server_parallel_->setToolTip(tr("Requests decoded at once; their verification shares one batched forward. Each "
                                  "takes a KV cache of the model's context length."));
  svf->addRow(server_enabled_);
  svf->addRow(tr("Address:"), server_host_);
  svf->addRow(tr("Port:"), server_port_);
  svf->addRow(tr("API key:"), server_key_);
  svf->addRow(tr("Parallel requests:"), server_parallel_);
  connect(server_enabled_, &QCheckBox::toggled, this, &SettingsDialog::updateEnabled);

  auto* look = new QGroupBox(tr("Appearance"));
  auto* lf = new QFormLayout(look);
  lf->addRow(tr("Theme:"), theme_);

  // One line of help per field (hover), in the field's terms.
  drafter_->setToolTip(tr("Who proposes draft tokens for the target to verify: a small draft model, n-gram "
                          "lookup in the prompt, or nobody (plain decoding)"));
  tree_mode_->setToolTip(tr("Shape of each step's draft: a chain of k tokens, a dynamic tree (EAGLE-2), an "
                            "optimal static tree (Sequoia), or Auto: shape and budget chosen per request"));
  draft_k_->setToolTip(tr("Chain: draft tokens proposed per step; the target verifies them in one forward pass"));
  node_budget_->setToolTip(tr("Node budget: draft-tree nodes the target verifies per step (the cost of one step)"));
  depth_->setToolTip(tr("Depth: the longest root-to-leaf path, so the most tokens one step can accept"));
  branch_->setToolTip(tr("Branching: children expanded per node of a dynamic tree"));
  temperature_->setToolTip(tr("0 = greedy (always the most likely token); higher = more varied replies"));
  top_k_->setToolTip(tr("Sample only among the k most likely tokens (0 = all)"));
  top_p_->setToolTip(tr("Sample only among the most likely tokens whose probabilities add up to p (1 = all)"));
  max_tokens_->setToolTip(tr("A reply stops here and says it was cut off"));
  connect(drafter_, &QComboBox::currentIndexChanged, this, &SettingsDialog::updateEnabled);
  connect(tree_mode_, &QComboBox::currentIndexChanged, this, &SettingsDialog::updateEnabled);
  connect(temperature_, &QDoubleSpinBox::valueChanged, this, &SettingsDialog::updateEnabled);
  connect(pin_seed_, &QCheckBox::toggled, this, &SettingsDialog::updateEnabled);
  updateEnabled();

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->setObjectName(QStringLiteral("settingsButtons"));
  connect(buttons, &QDialogButtonBox::accepted, this, &SettingsDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

  QGroupBox* pipo = buildPipo(current.generation.pipo);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(models);
  auto* decode_row = new QHBoxLayout;  // the lossless drafters, and the approximate mode beside them
  decode_row->addWidget(spec, 1);
  decode_row->addWidget(pipo, 1);
  layout->addLayout(decode_row);
  layout->addWidget(sampling);
  auto* engine_row = new QHBoxLayout;  // where replies come from, and who else may ask for them
  engine_row->addWidget(engine, 1);
  engine_row->addWidget(server, 1);
  layout->addLayout(engine_row);
  layout->addWidget(look);
  layout->addWidget(buttons);
}

void SettingsDialog::updateEnabled() {
  const QString drafter = drafter_->currentData().toString();
  const QString mode = tree_mode_->currentData().toString();
  const bool drafts = drafter != QLatin1String("none");
  const bool chain = mode == QLatin1String("chain");
  const bool dynamic = mode == QLatin1String("dynamic");
  const bool optimal = mode == QLatin1String("optimal");
  // Only what the chosen drafter and tree mode read is editable.
  tree_mode_->setEnabled(drafts);
  draft_k_->setEnabled(drafts && chain);
  node_budget_->setEnabled(drafts && (dynamic || optimal));
  depth_->setEnabled(drafts && (dynamic || optimal));
  branch_->setEnabled(drafts && dynamic);
  // Greedy decoding ignores the sampling filters and the seed.
  const bool sampled = temperature_->value() > 0;
  top_k_->setEnabled(sampled);
  top_p_->setEnabled(sampled);
  pin_seed_->setEnabled(sampled);
  seed_->setEnabled(sampled && pin_seed_->isChecked());
  const bool serving = server_enabled_->isChecked();
  server_host_->setEnabled(serving);
  server_port_->setEnabled(serving);
  server_key_->setEnabled(serving);
  server_parallel_->setEnabled(serving);
  const bool pipo = pipo_enabled_ && pipo_enabled_->isChecked();
  for (QWidget* w : std::initializer_list<QWidget*>{pipo_release_, pipo_threshold_, pipo_raw_context_, pipo_fidelity_}) {
    if (w) w->setEnabled(pipo);
  }
}

void SettingsDialog::browse(QLineEdit* edit, const QString& caption) {
  const QString path = open_file_name(this, caption, edit->text(), tr("GGUF models (*.gguf);;All files (*)"));
  if (!path.isEmpty()) edit->setText(path);
}

AppSettings SettingsDialog::settings() const {
  AppSettings s = current_;  // what the dialog does not show (library folders, recent models) is kept
  s.target_path = target_->text().trimmed();
  s.draft_path = draft_->text().trimmed();
  GenerationSettings& g = s.generation;
  const QString drafter = drafter_->currentData().toString();
  g.drafter = drafter == QLatin1String("ngram")   ? DrafterKind::ngram
              : drafter == QLatin1String("block") ? DrafterKind::block
              : drafter == QLatin1String("mtp")   ? DrafterKind::mtp
                                                  : DrafterKind::model;
  g.draft_k = drafter == QLatin1String("none") ? 0 : draft_k_->value();
  const QString mode = tree_mode_->currentData().toString();
  g.auto_tree = mode == QLatin1String("auto");
  if (!g.auto_tree && !parse_tree_mode(mode.toStdString(), &g.tree_mode)) g.tree_mode = TreeMode::chain;
  g.node_budget = node_budget_->value();
  g.tree_depth = depth_->value();
  g.tree_branch = branch_->value();
  g.sampling.temperature = static_cast<float>(temperature_->value());
  g.sampling.top_k = top_k_->value();
  g.sampling.top_p = static_cast<float>(top_p_->value());
  g.sampling.seed = static_cast<uint64_t>(seed_->value());
  g.pin_seed = pin_seed_->isChecked();
  g.max_tokens = max_tokens_->value();
  s.theme = theme_->currentData().toString();
  s.chat_template = chat_template_->currentData().toString();
  s.kv_type = kv_type_->currentData().toString();
  s.activations = activations_->currentData().toString();
  s.engine.url = remote_url_->text().trimmed();
  s.engine.key = remote_key_->text();
  s.engine.model = remote_model_->text().trimmed();
  s.server.enabled = server_enabled_->isChecked();
  s.server.host = server_host_->text().trimmed();
  if (s.server.host.isEmpty()) s.server.host = ServerSettings{}.host;
  s.server.port = server_port_->value();
  s.server.key = server_key_->text();
  s.server.parallel = server_parallel_->value();
  readPipo(s);
  return s;
}

void SettingsDialog::accept() {
  const AppSettings s = settings();
  if (s.engine.isRemote()) {
    try {
      remote::parse_endpoint_url(s.engine.url.toStdString());
    } catch (const std::exception& e) {
      check_->setText(tr("Server URL: %1").arg(QString::fromStdString(e.what())));
      check_->setStyleSheet(QStringLiteral("color: #c0392b;"));
      adjustSize();
      return;
    }
  }
  if (s.server.enabled) {
    // The server's own rules (a non-loopback address needs a key), checked before anything starts.
    ServerSettings checked = s.server;
    if (checked.key.isEmpty()) checked.key = qEnvironmentVariable("SPECCHAT_API_KEY");
    try {
      check_server_settings(checked);
    } catch (const std::exception& e) {
      check_->setText(tr("Server: %1").arg(QString::fromStdString(e.what())));
      check_->setStyleSheet(QStringLiteral("color: #c0392b;"));
      adjustSize();
      return;
    }
  }
  if (s.generation.pipo.enabled) {
    // A release whose manifest cannot be read is explained here; the engine checks the rest
    // (hashes, one release, the target) when it loads the unit, and says so if it refuses it.
    const PipoManifestSummary m = read_pipo_manifest(pipo_release_folder(s.generation.pipo));
    if (!m.ok) {
      check_->setText(tr("PIPO: %1").arg(m.error));
      check_->setStyleSheet(QStringLiteral("color: #c0392b;"));
      adjustSize();
      return;
    }
  }
  const ModelCheck c = check_model_files(s.target_path, s.draft_path);
  if (!c.ok) {
    check_->setText(c.error);
    check_->setStyleSheet(QStringLiteral("color: #c0392b;"));
    adjustSize();  // room for the whole explanation (it wraps over several lines)
    return;  // stay open: the user fixes the paths or cancels
  }
  check_->setText(c.warnings.isEmpty() ? QString() : tr("Accepted vocabulary differences: %1").arg(c.warnings.join(QStringLiteral("; "))));
  check_->setStyleSheet(QString());
  QDialog::accept();
}

}  // namespace specchat::ui

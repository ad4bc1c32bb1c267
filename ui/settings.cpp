#include "ui/settings.h"

#include <QApplication>
#include <QFileInfo>
#include <QPalette>
#include <QSettings>
#include <QStyle>
#include <QStyleFactory>

#include <algorithm>
#include <charconv>
#include <memory>

#include "engine/model_pair.h"

namespace specchat::ui {

namespace {

std::unique_ptr<QSettings> open_settings(const QString& file) {
  if (file.isEmpty()) return std::make_unique<QSettings>(QStringLiteral("SpecChat"), QStringLiteral("SpecChat"));
  return std::make_unique<QSettings>(file, QSettings::IniFormat);
}

int read_int(const QSettings& q, const char* key, int fallback, int lo, int hi) {
  bool ok = false;
  const int v = q.value(QLatin1String(key), fallback).toInt(&ok);
  return ok ? std::clamp(v, lo, hi) : fallback;
}

double read_double(const QSettings& q, const char* key, double fallback, double lo, double hi) {
  bool ok = false;
  const double v = q.value(QLatin1String(key), fallback).toDouble(&ok);
  return ok ? std::clamp(v, lo, hi) : fallback;
}

// The double whose shortest decimal form is the float's ("0.8" for 0.8f, not 0.800000011920929):
// what the user typed comes back in the settings file.
double float_setting(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  double out = v;
  std::from_chars(buf, r.ptr, out);
  return out;
}

QPalette dark_palette() {
  QPalette p;
  const QColor base(0x1e, 0x1f, 0x22), window(0x2b, 0x2d, 0x31), text(0xe6, 0xe6, 0xe6);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, window);
  p.setColor(QPalette::ToolTipBase, window);
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, window);
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, Qt::red);
  p.setColor(QPalette::Link, QColor(0x6c, 0xb4, 0xff));
  p.setColor(QPalette::Highlight, QColor(0x35, 0x74, 0xc4));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::PlaceholderText, QColor(0x90, 0x90, 0x90));
  p.setColor(QPalette::Disabled, QPalette::Text, QColor(0x80, 0x80, 0x80));
  p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x80, 0x80, 0x80));
  return p;
}

}  // namespace

AppSettings load_settings(const QString& file) {
  AppSettings s;
  const std::unique_ptr<QSettings> q = open_settings(file);
  s.target_path = q->value(QStringLiteral("models/target")).toString();
  s.draft_path = q->value(QStringLiteral("models/draft")).toString();
  GenerationSettings& g = s.generation;
  // Absent keys keep GenerationSettings' defaults, which are SpecSettings' (the CLI's).
  const QString drafter = q->value(QStringLiteral("drafter/kind"), QString::fromUtf8(drafter_kind_name(g.drafter))).toString();
  g.drafter = drafter == QLatin1String("ngram") ? DrafterKind::ngram : DrafterKind::model;
  g.draft_k = read_int(*q, "drafter/draft_k", g.draft_k, 0, 64);
  const QString mode = q->value(QStringLiteral("drafter/tree_mode"), QString::fromUtf8(tree_mode_name(g.tree_mode))).toString();
  g.auto_tree = mode == QLatin1String("auto");
  if (!g.auto_tree && !parse_tree_mode(mode.toStdString(), &g.tree_mode)) g.tree_mode = TreeMode::chain;
  g.node_budget = read_int(*q, "drafter/node_budget", g.node_budget, 1, 1024);
  g.tree_depth = read_int(*q, "drafter/depth", g.tree_depth, 1, 64);
  g.tree_branch = read_int(*q, "drafter/branch", g.tree_branch, 1, 16);
  g.sampling.temperature = static_cast<float>(read_double(*q, "sampling/temperature", g.sampling.temperature, 0, 5));
  g.sampling.top_k = read_int(*q, "sampling/top_k", g.sampling.top_k, 0, 1000000);
  g.sampling.top_p = static_cast<float>(read_double(*q, "sampling/top_p", g.sampling.top_p, 0, 1));
  g.sampling.seed = q->value(QStringLiteral("sampling/seed"), QVariant::fromValue<qulonglong>(g.sampling.seed)).toULongLong();
  g.pin_seed = q->value(QStringLiteral("sampling/pin_seed"), g.pin_seed).toBool();
  g.max_tokens = read_int(*q, "sampling/max_tokens", g.max_tokens, 1, 1000000);
  // Settings › PIPO: off unless the file says "true" (approximate: never a default).
  g.pipo.enabled = q->value(QStringLiteral("pipo/enabled"), false).toBool();
  g.pipo.release = q->value(QStringLiteral("pipo/release")).toString().trimmed();
  g.pipo.threshold = static_cast<float>(read_double(*q, "pipo/threshold", g.pipo.threshold, -1, 1));
  if (g.pipo.threshold < 0) g.pipo.threshold = -1.0f;  // the release's recommended threshold
  g.pipo.raw_context = read_int(*q, "pipo/raw_context", g.pipo.raw_context, 0, 16 * 1024 * 1024);
  g.pipo.fidelity_every = read_int(*q, "pipo/fidelity_every", g.pipo.fidelity_every, 0, 1000000);
  s.theme = q->value(QStringLiteral("ui/theme"), s.theme).toString();
  s.model_folders = q->value(QStringLiteral("models/folders")).toStringList();
  s.recent_models = q->value(QStringLiteral("models/recent")).toStringList();
  s.engine.url = q->value(QStringLiteral("engine/remote_url")).toString().trimmed();
  s.engine.key = q->value(QStringLiteral("engine/remote_key")).toString();
  s.engine.model = q->value(QStringLiteral("engine/remote_model")).toString().trimmed();
  s.server.enabled = q->value(QStringLiteral("server/enabled"), false).toBool();
  s.server.host = q->value(QStringLiteral("server/host"), s.server.host).toString().trimmed();
  if (s.server.host.isEmpty()) s.server.host = ServerSettings{}.host;
  s.server.port = read_int(*q, "server/port", s.server.port, 0, 65535);
  s.server.key = q->value(QStringLiteral("server/key")).toString();
  s.server.parallel = read_int(*q, "server/parallel", s.server.parallel, 1, 16);
  {  // values the engine does not have fall back to the defaults
    const QString kv = q->value(QStringLiteral("models/kv_type")).toString().trimmed();
    if (kv == QLatin1String("f16") || kv == QLatin1String("f32")) s.kv_type = kv;
    const QString act = q->value(QStringLiteral("models/activations")).toString().trimmed();
    if (act == QLatin1String("q8") || act == QLatin1String("f32")) s.activations = act;
  }
  s.chat_template = q->value(QStringLiteral("models/chat_template")).toString().trimmed();
  {
    const std::vector<std::string> names = chat_template_names();
    if (std::find(names.begin(), names.end(), s.chat_template.toStdString()) == names.end()) s.chat_template.clear();
  }
  return s;
}

bool save_settings(const AppSettings& s, const QString& file) {
  const std::unique_ptr<QSettings> q = open_settings(file);
  const GenerationSettings& g = s.generation;
  q->setValue(QStringLiteral("models/target"), s.target_path);
  q->setValue(QStringLiteral("models/draft"), s.draft_path);
  q->setValue(QStringLiteral("drafter/kind"), g.drafter == DrafterKind::ngram ? QStringLiteral("ngram") : QStringLiteral("model"));
  q->setValue(QStringLiteral("drafter/draft_k"), g.draft_k);
  q->setValue(QStringLiteral("drafter/tree_mode"),
              g.auto_tree ? QStringLiteral("auto") : QString::fromUtf8(tree_mode_name(g.tree_mode)));
  q->setValue(QStringLiteral("drafter/node_budget"), g.node_budget);
  q->setValue(QStringLiteral("drafter/depth"), g.tree_depth);
  q->setValue(QStringLiteral("drafter/branch"), g.tree_branch);
  q->setValue(QStringLiteral("sampling/temperature"), float_setting(g.sampling.temperature));
  q->setValue(QStringLiteral("sampling/top_k"), g.sampling.top_k);
  q->setValue(QStringLiteral("sampling/top_p"), float_setting(g.sampling.top_p));
  q->setValue(QStringLiteral("sampling/seed"), QVariant::fromValue<qulonglong>(g.sampling.seed));
  q->setValue(QStringLiteral("sampling/pin_seed"), g.pin_seed);
  q->setValue(QStringLiteral("sampling/max_tokens"), g.max_tokens);
  q->setValue(QStringLiteral("pipo/enabled"), g.pipo.enabled);
  q->setValue(QStringLiteral("pipo/release"), g.pipo.release.trimmed());
  q->setValue(QStringLiteral("pipo/threshold"), g.pipo.threshold < 0 ? -1.0 : float_setting(g.pipo.threshold));
  q->setValue(QStringLiteral("pipo/raw_context"), g.pipo.raw_context);
  q->setValue(QStringLiteral("pipo/fidelity_every"), g.pipo.fidelity_every);
  q->setValue(QStringLiteral("ui/theme"), s.theme);
  q->setValue(QStringLiteral("models/folders"), s.model_folders);
  q->setValue(QStringLiteral("models/recent"), s.recent_models);
  q->setValue(QStringLiteral("engine/remote_url"), s.engine.url.trimmed());
  q->setValue(QStringLiteral("engine/remote_key"), s.engine.key);
  q->setValue(QStringLiteral("engine/remote_model"), s.engine.model.trimmed());
  q->setValue(QStringLiteral("models/chat_template"), s.chat_template);
  q->setValue(QStringLiteral("models/kv_type"), s.kv_type);
  q->setValue(QStringLiteral("models/activations"), s.activations);
  q->setValue(QStringLiteral("server/enabled"), s.server.enabled);
  q->setValue(QStringLiteral("server/host"), s.server.host.trimmed());
  q->setValue(QStringLiteral("server/port"), s.server.port);
  q->setValue(QStringLiteral("server/key"), s.server.key);
  q->setValue(QStringLiteral("server/parallel"), s.server.parallel);
  q->sync();
  return q->status() == QSettings::NoError;
}

void apply_theme(const QString& theme) {
  auto* app = qobject_cast<QApplication*>(QCoreApplication::instance());
  if (app == nullptr) return;
  if (theme == QLatin1String("dark") || theme == QLatin1String("light")) {
    // Fusion draws every widget from the palette, so one palette themes the whole app.
    if (QStyle* fusion = QStyleFactory::create(QStringLiteral("Fusion"))) QApplication::setStyle(fusion);
    QApplication::setPalette(theme == QLatin1String("dark") ? dark_palette() : QApplication::style()->standardPalette());
  } else {
    QApplication::setPalette(QApplication::style()->standardPalette());
  }
}

ModelPaths models_to_load(const AppSettings& s) {
  ModelPaths p{s.target_path, s.draft_path};
  if (p.target.isEmpty() && p.draft.isEmpty()) {
    const QString bundled = QString::fromStdString(bundled_draft_path());
    if (QFileInfo::exists(bundled)) p.draft = bundled;
  }
  return p;
}

QString drafter_label(const GenerationSettings& g) {
  if (g.draft_k <= 0) return QStringLiteral("none");
  return g.drafter == DrafterKind::ngram ? QStringLiteral("n-gram") : QStringLiteral("draft model");
}

}  // namespace specchat::ui

#include "ui/pipo_types.h"

#include <QDir>
#include <QFileInfo>

#include <nlohmann/json.hpp>

#include <cmath>
#include <exception>
#include <fstream>

#include "engine/gguf.h"
#include "engine/model_pair.h"

namespace specchat::ui {

QString bundled_pipo_release() {
  const QString dir = QDir(QString::fromStdString(bundled_models_dir())).filePath(QStringLiteral("pipo"));
  return QFileInfo::exists(QDir(dir).filePath(QStringLiteral("pipo.json"))) ? dir : QString();
}

QString pipo_release_folder(const PipoChoice& c) {
  const QString given = c.release.trimmed();
  return given.isEmpty() ? bundled_pipo_release() : given;
}

PipoManifestSummary read_pipo_manifest(const QString& folder) {
  PipoManifestSummary s;
  if (folder.trimmed().isEmpty()) {
    s.error = QStringLiteral("no release folder (none is bundled)");
    return s;
  }
  const QFileInfo fi(folder.trimmed());
  const QString manifest = fi.isDir() ? QDir(fi.filePath()).filePath(QStringLiteral("pipo.json")) : fi.filePath();
  try {
    std::ifstream in(manifest.toStdString());
    if (!in) {
      s.error = QStringLiteral("%1 cannot be read").arg(manifest);
      return s;
    }
    const nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
    if (!m.is_object() || m.value("format", std::string()) != "specchat-pipo") {
      s.error = QStringLiteral("%1 is not a specchat-pipo manifest").arg(manifest);
      return s;
    }
    if (m.contains("release") && m["release"].is_string()) s.release = QString::fromStdString(m["release"].get<std::string>());
    if (m.contains("recommended_threshold") && m["recommended_threshold"].is_number()) {
      const double t = m["recommended_threshold"].get<double>();
      if (std::isfinite(t) && t >= 0 && t <= 1) s.recommended_threshold = static_cast<float>(t);
    }
    s.ok = true;
    // The backbone's context, from its header alone (the dialog shows the derived latent limit).
    if (m.contains("parts") && m["parts"].is_object() && m["parts"].contains("backbone") &&
        m["parts"]["backbone"].is_object() && m["parts"]["backbone"].contains("file") &&
        m["parts"]["backbone"]["file"].is_string()) {
      const std::string name = m["parts"]["backbone"]["file"].get<std::string>();
      const QString file = QFileInfo(manifest).dir().filePath(QString::fromStdString(name));
      try {
        const GgufFile g = GgufFile::open(file.toStdString());
        const std::string arch = g.get_string_or("general.architecture", "llama");
        s.backbone_context = static_cast<int>(g.get_u32_or(arch + ".context_length", 0));
      } catch (const std::exception&) {
        s.backbone_context = 0;  // the loader names what is wrong with the part when PIPO loads
      }
    }
  } catch (const std::exception& e) {
    s = PipoManifestSummary{};
    s.error = QString::fromStdString(e.what());
  }
  return s;
}

QString format_pipo_status(const PipoStatus& s) {
  if (!s.enabled) return {};
  if (!s.loaded) {
    return s.error.isEmpty() ? QStringLiteral("PIPO: not loaded yet") : QStringLiteral("PIPO not loaded: %1").arg(s.error);
  }
  const QString ok = QStringLiteral("\u2713"), no = QStringLiteral("\u2717");
  return QStringLiteral("PIPO %1 (%2): backbone %3 \u00b7 MTP head %4 \u00b7 compressor + confidence head %5 \u00b7 "
                        "threshold %6 \u00b7 %7 raw tokens / %8 pairs")
      .arg(s.release, QLatin1String(kPipoLabel), s.backbone.isEmpty() ? no : ok, s.mtp_head.isEmpty() ? no : ok,
           s.compressor && s.confidence_head ? ok : no)
      .arg(s.threshold, 0, 'f', 2)
      .arg(s.raw_context)
      .arg(s.latent_context);
}

MessageStats pipo_message_stats(const PipoLive& p, int n_tokens) {
  MessageStats m;
  m.mode = kPipoMode;
  m.n_tokens = n_tokens;
  m.tokens_per_s = p.tokens_per_s();
  m.ttft_ms = p.ttft_ms;
  m.acceptance_rate = p.acceptance_rate();
  m.mean_accepted_length = p.tokens_per_step();
  m.n_drafted = static_cast<int>(p.head_runs);
  m.n_accepted = static_cast<int>(p.accepted);
  return m;
}

}  // namespace specchat::ui

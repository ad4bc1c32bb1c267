// ChatController and the engine (chat_controller.h): where replies come from (the local engine
// with its chat template, or a remote server) and the status line when models load.
#include <QFileInfo>

#include "ui/chat_controller.h"
#include "ui/engine_worker.h"

namespace specchat::ui {

void ChatController::onModelsLoading(const QString& description) { setStatus(description, false); }

void ChatController::setChatTemplate(const QString& name) { worker_->setChatTemplate(name); }
void ChatController::setCompute(const QString& kv_type, const QString& activations) {
  worker_->setCompute(kv_type, activations);
}

void ChatController::setRemote(const RemoteEngine& given) {
  RemoteEngine r = given;
  r.url = r.url.trimmed();
  if (r.isRemote() && r.key.isEmpty()) r.key = qEnvironmentVariable("SPECCHAT_API_KEY");
  worker_->setRemote(r);
  remote_url_ = r.url;
  if (!isBusy()) {
    setStatus(r.isRemote() ? tr("Replies come from the server %1").arg(r.url) : (ready_text_.isEmpty() ? status_text_ : ready_text_),
              false);
  }
}

void ChatController::setServer(const ServerSettings& given) {
  ServerSettings s = given;
  s.host = s.host.trimmed();
  if (s.key.isEmpty()) s.key = qEnvironmentVariable("SPECCHAT_API_KEY");
  EngineWorker* w = worker_;
  QMetaObject::invokeMethod(w, [w, s] { w->setServer(s); }, Qt::QueuedConnection);
}

void ChatController::onModelsLoaded(const ModelInfo& info) {
  models_loaded_ = true;
  template_name_ = info.template_name.toStdString();
  QString text = tr("Ready \u00b7 %1").arg(QFileInfo(info.target_path).fileName());
  if (!info.draft_path.isEmpty()) text += tr(" + draft %1").arg(QFileInfo(info.draft_path).fileName());
  text += tr(" \u00b7 %1 context tokens").arg(info.n_ctx);
  // The chat-template notice is spelled out (the user can pick one in Settings); other warnings
  // (accepted vocabulary differences, drafters not used) are counted.
  int others = 0;
  for (const QString& w : info.warnings) {
    if (w.contains(QLatin1String("chat template"))) {
      text += QStringLiteral(" \u00b7 ") + w;
    } else {
      ++others;
    }
  }
  if (others > 0) text += tr(" \u00b7 %n vocabulary warning(s)", "", others);
  if (!storage_notice_.isEmpty()) text += QStringLiteral(" \u00b7 ") + storage_notice_;
  models_ready_text_ = text;
  engine_error_ = false;
  // PIPO's line (which parts loaded) follows the models' when PIPO is on.
  const QString pipo = format_pipo_status(pipo_status_);
  ready_text_ = pipo.isEmpty() ? text : text + QStringLiteral(" \u00b7 ") + pipo;
  // A first Send loads the models lazily: the reply is being generated, which "Ready" would deny.
  setStatus(isBusy() ? generatingText() : ready_text_, isBusy() ? false : storage_notice_is_error_);
  // The models table: path, size, SHA-256 (hashed on the storage thread), architecture.
  if (persistent_) {
    post([t = info.target_path, d = info.draft_path](StorageWorker* w) {
      w->recordModel(t, QStringLiteral("llama"));
      if (!d.isEmpty()) w->recordModel(d, QStringLiteral("llama"));
    });
  }
}

}  // namespace specchat::ui

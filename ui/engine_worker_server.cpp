// EngineWorker's part of Settings › Server: the app's OpenAI-compatible server (LocalServer)
// over the chat's loaded pair.
#include "ui/engine_worker.h"
#include "ui/local_server.h"

#include <cstdio>

namespace specchat::ui {

int EngineWorker::sequencesWanted() const { return 1 + (server_settings_.enabled ? server_settings_.parallel : 0); }

void EngineWorker::setServer(const ServerSettings& s) {
  if (shutdown_.load()) return;
  if (s == server_settings_ && (server_ || !s.enabled)) return;  // nothing changes
  stopServer();
  server_settings_ = s;
  if (!pair_) {
    ServerState st;
    if (s.enabled) st.error = QStringLiteral("starts once the models have loaded");
    Q_EMIT serverStateChanged(st);
    return;
  }
  if (pair_->target->n_seq() != sequencesWanted()) {
    // The KV pool is sized at load: reload with room for the server's sequences (or without).
    unload();
    QString error;
    ensureLoaded(&error);  // starts the server on success; on failure says why (serverStateChanged)
    return;
  }
  startServer();
}

void EngineWorker::startServer() {
  if (!server_settings_.enabled || !pair_ || server_) return;
  ServerState st;
  try {
    const EngineShare share{1, server_settings_.parallel, &turns_};
    server_ = std::make_unique<LocalServer>(server_settings_, *pair_, share, options_.n_threads, pipo_choice_);
    st.running = true;
    st.pipo_release = QString::fromStdString(server_->pipo_release());
    st.pipo_error = QString::fromStdString(server_->pipo_error());
    st.url = QString::fromStdString(server_->url());
    st.parallel = server_settings_.parallel;
  } catch (const std::exception& e) {
    server_.reset();
    st.error = QString::fromStdString(e.what());
    // Also where a headless run (and a user reading the terminal) sees it, as the started
    // server's "listening" line is.
    std::fprintf(stderr, "app server not started: %s\n", e.what());
  }
  Q_EMIT serverStateChanged(st);
}

void EngineWorker::stopServer() {
  if (!server_) return;
  server_.reset();
  Q_EMIT serverStateChanged(ServerState{});
}

}  // namespace specchat::ui

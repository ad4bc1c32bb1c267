#include "ui/local_server.h"

#include <chrono>

#include "app/serve/http_server.h"
#include "app/serve/log.h"
#include "app/serve/pipo_service.h"
#include "app/serve/scheduler.h"
#include "engine/model_pair.h"

namespace specchat::ui {

namespace {
serve::ServeConfig config_of(const ServerSettings& s) {
  serve::ServeConfig c;
  c.host = s.host.trimmed().toStdString();
  c.port = s.port;
  c.api_key = s.key.toStdString();
  c.parallel = s.parallel;
  return c;
}
}  // namespace

void check_server_settings(const ServerSettings& s) {
  const serve::ServeConfig c = config_of(s);
  if (!serve::is_loopback_host(c.host) && c.api_key.empty()) {
    // The CLI's wording names --api-key, which the app does not have.
    throw serve::ConfigError("refusing to listen on " + c.host +
                             " without an API key: set one in Settings \u203a Server or in SPECCHAT_API_KEY, or use "
                             "127.0.0.1");
  }
  serve::validate_config(c);
}

LocalServer::LocalServer(const ServerSettings& s, ModelPair& pair, const EngineShare& share, int threads,
                         const PipoChoice& pipo) {
  check_server_settings(s);
  cfg_ = config_of(s);
  cfg_.model = pair.target->path();
  cfg_.draft = pair.draft ? pair.draft->path() : "none";
  cfg_.threads = threads;
  // As `serve --draft none`: without a draft model a request drafts only when it names a drafter.
  if (!pair.draft) cfg_.spec.drafter = DrafterChoice::none;
  log_ = std::make_unique<serve::Log>("info", "");
  scheduler_ = std::make_unique<serve::Scheduler>(pair, cfg_.parallel, cfg_.queue, threads, metrics_, share);
  metrics_.set_device_memory(pair.target->memory().device_used_bytes);
  if (pipo.enabled) {
    const std::string folder = pipo_release_folder(pipo).toStdString();
    try {
      if (folder.empty()) throw std::runtime_error("no release folder (Settings \u203a PIPO) and none is bundled");
      PipoUnit unit = serve::load_serve_pipo_unit(folder, cfg_.model, pair.target->vocab(), pair.target->n_ctx(),
                                                  threads, pair.target->backend_kind(), pair.target->memory().kv_type);
      pipo_ = std::make_unique<serve::PipoService>(std::move(unit), pipo.threshold, pair.target->n_ctx(), cfg_.queue,
                                                   metrics_);
    } catch (const std::exception& e) {
      pipo_.reset();
      pipo_error_ = e.what();
      log_->warn("app server: PIPO unavailable: " + pipo_error_);
    }
  }
  http_ = std::make_unique<serve::ApiServer>(cfg_, pair, *scheduler_, metrics_, *log_, pipo_.get());
  port_ = http_->bind();  // throws when the address cannot be bound; the members clean up
  scheduler_->start();
  if (pipo_) pipo_->start();
  http_->set_ready(true);
  listener_ = std::thread([this] {
    http_->listen();
    listen_done_ = true;
  });
  // stop() only reaches a server that has started listening: wait for it (bounded).
  for (int i = 0; i < 5000 && !http_->listening() && !listen_done_.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  log_->info("app server listening on " + url() + " target=" + cfg_.model + " draft=" + cfg_.draft +
             " parallel=" + std::to_string(cfg_.parallel) + " queue=" + std::to_string(cfg_.queue) +
             " auth=" + (cfg_.api_key.empty() ? "off" : "on") +
             " pipo=" + (pipo_ ? pipo_->info().release + "(approximate)" : std::string("none")) +
             " (sharing the chat's models)");
}

LocalServer::~LocalServer() {
  // The scheduler first: running and queued requests end with a 503 "shutting down" error, which
  // their handlers send (streams: an error event, then [DONE]) before the HTTP side stops, and
  // stopping it would cut streams off mid-way.
  if (scheduler_ || pipo_) {
    if (scheduler_) scheduler_->stop();
    if (pipo_) pipo_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // handlers wake at once; write
  }
  if (http_) {
    for (int i = 0; i < 5000 && !http_->listening() && !listen_done_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    http_->set_ready(false);
    http_->stop();
  }
  if (listener_.joinable()) listener_.join();
  if (scheduler_) scheduler_->stop();
  http_.reset();  // before the scheduler, PIPO service, metrics and log it refers to
  scheduler_.reset();
  pipo_.reset();
  if (log_) log_->info("app server stopped");
}

std::string LocalServer::pipo_release() const { return pipo_ ? pipo_->info().release : std::string(); }

std::string LocalServer::url() const { return "http://" + cfg_.host + ":" + std::to_string(port_) + "/v1"; }

}  // namespace specchat::ui

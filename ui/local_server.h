// The app's OpenAI-compatible server (Settings › Server, issue 14 §1): the routes, limits, auth,
// metrics and scheduler of `specchat-cli serve` (app/serve/), over the ModelPair the chat has
// loaded rather than a second copy of the models. The scheduler's Engine uses its own KV
// sequences of the pair's pool and takes turns with the chat's engine on one TurnLock
// (EngineShare), so both keep exactly the tokens each would produce alone.
//
// With Settings › PIPO on, the server also answers requests that ask for "decode_mode": "pipo"
// (APPROXIMATE, labelled in every response) from its own copy of the release unit, bound to the
// loaded target as `specchat-cli serve --pipo` binds it (a second copy of the backbone in memory:
// the server's PIPO requests run on their own thread, apart from the chat's PIPO session). A
// release that does not load leaves PIPO unavailable (400 pipo_unavailable) with the reason in
// pipo_error(); the server itself still runs.
//
// Request defaults are the server's (ServeConfig: the model drafter, a chain of draft_k, greedy,
// 128 tokens), not the chat's settings: a caller sets what it wants per request, as with any
// OpenAI-compatible server.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "app/serve/config.h"
#include "app/serve/metrics.h"
#include "engine/runtime/engine.h"
#include "ui/engine_types.h"
#include "ui/pipo_types.h"

namespace specchat {
struct ModelPair;
namespace serve {
class ApiServer;
class Log;
class PipoService;
class Scheduler;
}  // namespace serve
}  // namespace specchat

namespace specchat::ui {

// Checks `s` (and the key it would use) by the server's rules, worded for the app: throws
// serve::ConfigError naming the problem (another address than loopback without a key: "set one
// in Settings › Server or SPECCHAT_API_KEY"; a port or parallel out of range).
void check_server_settings(const ServerSettings& s);

class LocalServer {
 public:
  // Serves `pair` on s.host:s.port with `s.parallel` requests at once on the KV sequences of
  // `share` (at least s.parallel of them; the turn lock the chat's engine holds too). `threads`:
  // the pair's PairOptions::n_threads. Returns when it listens. Throws serve::ConfigError for
  // settings the server refuses (a non-loopback host without a key, a bad port or parallel) and
  // std::runtime_error when the address cannot be bound (the port in use). `pair` and the lock
  // must outlive the server.
  // `pipo`: Settings › PIPO (release folder, default threshold); disabled = no PIPO.
  LocalServer(const ServerSettings& s, ModelPair& pair, const EngineShare& share, int threads,
              const PipoChoice& pipo = {});
  // Stops listening, ends queued and running requests (503) and joins its threads.
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  int port() const { return port_; }
  // "http://HOST:PORT/v1" (what a client's base URL is).
  std::string url() const;
  // The PIPO release served ("" when none), and why PIPO is unavailable ("" when served or off).
  std::string pipo_release() const;
  const std::string& pipo_error() const { return pipo_error_; }

 private:
  serve::ServeConfig cfg_;
  serve::ServeMetrics metrics_;
  std::unique_ptr<serve::Log> log_;
  std::unique_ptr<serve::Scheduler> scheduler_;
  std::unique_ptr<serve::PipoService> pipo_;
  std::string pipo_error_;
  std::unique_ptr<serve::ApiServer> http_;
  std::thread listener_;
  std::atomic<bool> listen_done_{false};
  int port_ = 0;
};

}  // namespace specchat::ui

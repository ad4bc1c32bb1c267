// ApiServer: the HTTP side of `specchat-cli serve` over cpp-httplib (Debian's libcpp-httplib-dev,
// the library llama-server uses). Routes (issue 14 §2):
//   POST /v1/chat/completions, POST /v1/completions   (streaming SSE or one JSON object)
//   GET  /v1/models, GET /health (no key needed), GET /metrics (Prometheus text)
// Requests with "decode_mode": "pipo" (APPROXIMATE) go to the PipoService when one is given,
// else they get 400 pipo_unavailable; /health and /v1/models name its release.
// Every refusal is a JSON error in OpenAI's shape (ApiError): unknown routes 404, bodies over
// the size limit 413, malformed requests 400, a missing or wrong key 401, a full queue 503 with
// Retry-After. Handlers never let an exception out (500 JSON).
//
// Requests are parsed, validated and tokenized on the HTTP thread, then handed to the Scheduler
// as Jobs; the HTTP thread waits for the job's text and notices a client that went away
// (client_socket.h), which cancels the job (dropped from the queue, or its sequence cancelled).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "app/serve/config.h"
#include "app/serve/log.h"
#include "app/serve/metrics.h"
#include "app/serve/scheduler.h"
#include "engine/model_pair.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace specchat::serve {

// Socket options of the listening socket: SO_REUSEADDR only (a restart binds at once over
// connections in TIME_WAIT), never SO_REUSEPORT, so binding a port that another process listens
// on fails ("in use") instead of sharing it.
void exclusive_socket_options(int sock);

// Constant-time comparison of a presented key with the server's (time independent of where
// they differ; the length of `expected` may leak, not its content).
bool keys_equal(const std::string& presented, const std::string& expected);

class PipoService;

class ApiServer {
 public:
  // Everything must outlive the server. The server is not ready (/health 503) until set_ready.
  // `pipo`: the PIPO unit's service (pipo_service.h); null = none loaded.
  ApiServer(const ServeConfig& c, ModelPair& pair, Scheduler& scheduler, ServeMetrics& metrics, Log& log,
            PipoService* pipo = nullptr);
  ~ApiServer();

  // Binds c.host:c.port (port 0: any free one). Returns the bound port; throws
  // std::runtime_error when the address cannot be bound.
  int bind();
  // Serves until stop(); false when listening failed.
  bool listen();
  void stop();
  // Whether listen() is running (stop() reaches only a server that has started listening).
  bool listening() const;
  void set_ready(bool ready) { ready_ = ready; }

 private:
  void install_routes();
  // The methods a known route takes ("GET", "POST"); "" for an unknown path.
  static std::string allowed_methods(const std::string& path);
  // True when no key is configured or the request carries it (Authorization: Bearer <key>);
  // otherwise writes the 401 answer.
  bool authorized(const httplib::Request& req, httplib::Response& res);
  void handle_generate(const httplib::Request& req, httplib::Response& res, Endpoint ep);

  const ServeConfig& cfg_;
  ModelPair& pair_;
  Scheduler& scheduler_;
  ServeMetrics& metrics_;
  Log& log_;
  PipoService* pipo_ = nullptr;
  std::unique_ptr<httplib::Server> svr_;
  std::atomic<bool> ready_{false};
  std::atomic<uint64_t> next_id_{1};
  int max_input_ = 0, max_output_ = 0;
};

}  // namespace specchat::serve

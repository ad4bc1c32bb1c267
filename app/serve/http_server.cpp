// ApiServer: routes, authentication, error bodies (the generation handler is in generate.cpp).
#include "app/serve/http_server.h"

#include <sys/socket.h>

#include "app/serve/client_socket.h"
#include "app/serve/connection_pool.h"
#include "app/serve/pipo_service.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>

namespace specchat::serve {

using nlohmann::json;

bool keys_equal(const std::string& presented, const std::string& expected) {
  // Every byte of `expected` is visited whatever `presented` holds; differences are OR-ed.
  unsigned diff = presented.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char a = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff |= a ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

namespace {

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// The request's Content-Length headers (none is valid): each one run of 1-18 digits, all equal.
bool content_length_valid(const httplib::Request& req) {
  std::string first;
  auto [it, end] = req.headers.equal_range("Content-Length");
  for (; it != end; ++it) {
    const std::string& v = it->second;
    if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    if (!first.empty() && v != first) return false;
    first = v;
  }
  return true;
}

const char* status_message(int status) {
  switch (status) {
    case 400: return "the request could not be read (malformed HTTP)";
    case 401: return "a valid API key is required (Authorization: Bearer <key>)";
    case 404: return "no such route";
    case 405: return "method not allowed";
    case 408: return "the request was not received in time";
    case 413: return "the request body is too large";
    case 414: return "the request URI is too long";
    case 431: return "the request headers are too large";
    default: return status >= 500 ? "internal server error" : "the request was refused";
  }
}

}  // namespace

ApiServer::ApiServer(const ServeConfig& c, ModelPair& pair, Scheduler& scheduler, ServeMetrics& metrics, Log& log,
                     PipoService* pipo)
    : cfg_(c), pair_(pair), scheduler_(scheduler), metrics_(metrics), log_(log), pipo_(pipo),
      svr_(std::make_unique<httplib::Server>()) {
  const int n_ctx = pair_.target->n_ctx();
  max_input_ = c.max_input_tokens > 0 ? std::min(c.max_input_tokens, n_ctx - 1) : n_ctx - 1;
  max_output_ = c.max_output_tokens > 0 ? c.max_output_tokens : n_ctx;
  // One HTTP thread per request that may wait (active + queued) plus spares for refusals,
  // health checks and metrics scrapes, so a full queue is answered with 503 at once; more on
  // demand (up to 4x, at least 256) so that slow clients holding threads cannot starve the
  // rest (ConnectionPool).
  const size_t threads = static_cast<size_t>(c.parallel + c.queue + 8);
  const size_t most = std::max<size_t>(256, 4 * threads);
  svr_->new_task_queue = [threads, most] { return new ConnectionPool(threads, most); };
  svr_->set_payload_max_length(c.max_body_bytes);
  const auto rt = std::chrono::duration<double>(c.read_timeout_s);
  svr_->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(rt));
  svr_->set_keep_alive_timeout(5);
  // Small JSON answers and SSE chunks: without TCP_NODELAY each waits on the client's delayed ACK
  // (~40-90 ms per request seen on loopback).
  svr_->set_tcp_nodelay(true);
  // Not cpp-httplib's default (SO_REUSEPORT on Linux), under which a second server binds a port
  // another one already listens on and the kernel splits the clients between them.
  svr_->set_socket_options(exclusive_socket_options);
  install_routes();
}

ApiServer::~ApiServer() = default;

void exclusive_socket_options(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

int ApiServer::bind() {
  int port = cfg_.port;
  if (port == 0) {
    port = svr_->bind_to_any_port(cfg_.host);
    if (port <= 0) throw std::runtime_error("cannot listen on " + cfg_.host + " (any port)");
  } else if (!svr_->bind_to_port(cfg_.host, cfg_.port)) {
    throw std::runtime_error("cannot listen on " + cfg_.host + ":" + std::to_string(cfg_.port) +
                             " (in use, or not an address of this machine)");
  }
  if (!raise_listen_backlog(port)) log_.warn("could not raise the listen backlog (bursts of clients may be reset)");
  return port;
}

bool ApiServer::listen() { return svr_->listen_after_bind(); }

void ApiServer::stop() { svr_->stop(); }

bool ApiServer::listening() const { return svr_->is_running(); }

// Checked inside each handler (after cpp-httplib has read the body: answering from a pre-routing
// handler would leave an unread body on a keep-alive connection) and for unknown routes.
bool ApiServer::authorized(const httplib::Request& req, httplib::Response& res) {
  if (cfg_.api_key.empty()) return true;
  const std::string auth = req.get_header_value("Authorization");
  // The scheme is case-insensitive (RFC 7235 §2.1): "Bearer", "bearer" and "BEARER" all name it.
  const std::string prefix = "bearer ";
  const bool bearer = auth.size() > prefix.size() &&
                      std::equal(prefix.begin(), prefix.end(), auth.begin(), [](char p, char a) {
                        return p == static_cast<char>(std::tolower(static_cast<unsigned char>(a)));
                      });
  // One or more spaces separate the scheme from the credentials (RFC 7235 §2.1: 1*SP).
  const size_t key_at = bearer ? auth.find_first_not_of(' ', prefix.size()) : std::string::npos;
  if (key_at != std::string::npos && keys_equal(auth.substr(key_at), cfg_.api_key)) {
    return true;
  }
  metrics_.count_request("invalid");
  log_.info("refused " + req.method + " " + req.path + " from " + req.remote_addr + ": missing or wrong API key");
  res.set_header("WWW-Authenticate", "Bearer");
  send_json(res, 401, ApiError{401, status_message(401), "authentication_error", "", "invalid_api_key"}.body());
  return false;
}

std::string ApiServer::allowed_methods(const std::string& path) {
  if (path == "/health" || path == "/v1/models" || path == "/metrics") return "GET";
  if (path == "/v1/chat/completions" || path == "/v1/completions") return "POST";
  return "";
}

void ApiServer::install_routes() {
  httplib::Server& s = *svr_;
  // After the headers, before the body is read: ACK at once so a client holding its body back
  // for that ACK (Nagle) sends it now (quick_ack; ~40 ms per request on keep-alive connections).
  //
  // Every body is read as JSON whatever its Content-Type (`curl -d` says
  // application/x-www-form-urlencoded). cpp-httplib parses a form-typed body into fields, and
  // refuses one over 8 KiB with 413 (a limit compiled into Debian's library), though the server
  // takes bodies up to max_body_bytes: the form type is dropped here, before the body is read,
  // so the JSON reader sees the body as sent (the Request is cpp-httplib's own non-const
  // object, passed to this hook as const).
  //
  // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112 §6.3):
  // cpp-httplib would read a POST's body until the client closes, so a client that sent none
  // waited out the read timeout (10 s) for its 400. It is told Content-Length 0 here.
  //
  // Every Content-Length must be a run of digits, and several must agree (RFC 9112 §6.3: else
  // the framing is invalid, a 400 and the connection closes). cpp-httplib read "12abc" as 12,
  // "-5" as a huge length (413) and the first of conflicting values: a proxy reading another
  // framing than ours is how requests are smuggled. The answer says Connection: close. (The
  // socket's read side is not shut: with the body unread the kernel resets the connection and
  // the client loses the 400.)
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!content_length_valid(req)) {
      metrics_.count_request("invalid");
      log_.info("refused " + req.method + " " + req.path + " from " + req.remote_addr + ": invalid Content-Length");
      send_json(res, 400,
                ApiError{400, "invalid Content-Length: one run of digits, the same in every Content-Length header",
                         "invalid_request_error", "", "invalid_content_length"}
                    .body());
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "POST") {
      quick_ack(find_client_socket(req.remote_addr, req.remote_port));
      auto& headers = const_cast<httplib::Request&>(req).headers;  // names compare case-insensitively
      if (headers.find("Content-Length") == headers.end() && headers.find("Transfer-Encoding") == headers.end()) {
        headers.emplace("Content-Length", "0");
      }
      auto [it, end] = headers.equal_range("Content-Type");
      while (it != end) {
        const bool form = it->second.find("application/x-www-form-urlencoded") != std::string::npos;
        it = form ? headers.erase(it) : std::next(it);
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    // Called for every status ≥ 400: bodies already written (JSON errors) are left alone.
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404 && !authorized(req, res)) return httplib::Server::HandlerResponse::Handled;
    // A known route asked with another method: 405 with the methods it takes (RFC 9110 §15.5.6).
    if (res.status == 404) {
      const std::string allow = allowed_methods(req.path);
      if (!allow.empty()) {
        res.status = 405;
        res.set_header("Allow", allow);
      }
    }
    metrics_.count_request(res.status >= 500 ? "error" : "invalid");
    log_.info("refused " + req.method + " " + req.path + ": HTTP " + std::to_string(res.status));
    const std::string type = res.status >= 500 ? "server_error" : "invalid_request_error";
    send_json(res, res.status, ApiError{res.status, status_message(res.status), type, "", ""}.body());
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log_.error("internal error on " + req.method + " " + req.path + ": " + what);
    send_json(res, 500, ApiError{500, "internal server error", "server_error", "", "internal_error"}.body());
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready_) {
      json h{{"status", "ok"}};
      if (pipo_) h["pipo"] = {{"release", pipo_->info().release}, {"approximate", true}, {"label", kPipoLabel}};
      send_json(res, 200, h);
    } else {
      send_json(res, 503, ApiError{503, "loading the models", "unavailable_error", "", "loading"}.body());
    }
  });
  s.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    json m{{"id", cfg_.model_name},
           {"object", "model"},
           {"created", 0},
           {"owned_by", "specchat"},
           {"meta",
            {{"n_ctx", pair_.target->n_ctx()},
             {"n_vocab", pair_.target->vocab().size()},
             {"draft", pair_.draft != nullptr},
             {"parallel", cfg_.parallel},
             {"max_output_tokens", max_output_},
             {"max_input_tokens", max_input_}}}};
    if (pipo_) m["meta"]["pipo"] = pipo_->describe();
    send_json(res, 200, json{{"object", "list"}, {"data", json::array({m})}});
  });
  s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    res.set_content(metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Post("/v1/chat/completions",
         [this](const httplib::Request& req, httplib::Response& res) {
           if (authorized(req, res)) handle_generate(req, res, Endpoint::chat);
         });
  s.Post("/v1/completions",
         [this](const httplib::Request& req, httplib::Response& res) {
           if (authorized(req, res)) handle_generate(req, res, Endpoint::completion);
         });
}

}  // namespace specchat::serve

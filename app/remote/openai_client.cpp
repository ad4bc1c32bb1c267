// The OpenAI-compatible streaming client (app/remote/openai_client.h).
#include "app/remote/openai_client.h"

#include <httplib.h>

#include <chrono>
#include <sstream>
#include <stdexcept>

namespace specchat::remote {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

EndpointUrl parse_endpoint_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) throw std::invalid_argument("the endpoint must be an http:// or https:// URL: " + url);
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    throw std::invalid_argument("the endpoint must be an http:// or https:// URL: " + url);
  }
  const size_t host_start = scheme_end + 3;
  const size_t path_start = url.find('/', host_start);
  EndpointUrl e;
  e.scheme_host_port = url.substr(0, path_start);
  if (e.scheme_host_port.size() <= host_start) throw std::invalid_argument("the endpoint has no host: " + url);
  std::string path = path_start == std::string::npos ? "" : url.substr(path_start);
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0) path.resize(path.size() - 3);
  e.prefix = path;
  return e;
}

namespace {

// What went wrong in words a user can act on (httplib's own names are one word: "Connection").
std::string describe_http_error(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "could not connect (connection refused or host unreachable: is the server running on that port?)";
    case httplib::Error::ConnectionTimeout: return "timed out while connecting";
    case httplib::Error::Read: return "the connection broke while reading the answer (timed out or closed by the server)";
    case httplib::Error::Write: return "the connection broke while sending the request";
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification: return "TLS failed (" + httplib::to_string(e) + ")";
    case httplib::Error::Canceled: return "the request was cancelled";
    default: return httplib::to_string(e);
  }
}


// Sum of every sample of `name` (any labels) in a Prometheus text exposition; -1 when absent.
double prom_sum(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  double sum = -1;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;
    const size_t sp = line.rfind(' ');
    try {
      sum = (sum < 0 ? 0 : sum) + std::stod(line.substr(sp + 1));
    } catch (const std::exception&) {
    }
  }
  return sum;
}

struct VllmCounters {
  double drafted = -1, accepted = -1;
};

VllmCounters vllm_counters(httplib::Client& cli, const EndpointUrl& u, const httplib::Headers& h) {
  VllmCounters c;
  auto r = cli.Get((u.prefix + "/metrics").c_str(), h);
  if (!r || r->status != 200) return c;
  c.drafted = prom_sum(r->body, "vllm:spec_decode_num_draft_tokens_total");
  c.accepted = prom_sum(r->body, "vllm:spec_decode_num_accepted_tokens_total");
  return c;
}

std::string error_message(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  return body.substr(0, 300);
}

}  // namespace

RemoteResult remote_generate(const RemoteRequest& o, const std::function<void(const std::string&)>& on_text) {
  const EndpointUrl u = parse_endpoint_url(o.endpoint);
  const std::string& key = o.api_key;
  httplib::Client cli(u.scheme_host_port);
  cli.set_connection_timeout(10);
  cli.set_read_timeout(o.read_timeout_s);
  httplib::Headers headers;
  if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);

  json body{{"max_tokens", o.max_tokens}, {"temperature", o.temperature}, {"top_p", o.top_p}, {"seed", o.seed},
            {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  if (!o.model.empty()) body["model"] = o.model;
  if (o.top_k > 0) body["top_k"] = o.top_k;
  if (!o.stop.empty()) body["stop"] = o.stop;
  if (!o.speculative) body["speculative"] = false;
  if (o.extra.is_object()) {
    for (const auto& [k, v] : o.extra.items()) body[k] = v;
  }
  std::string path;
  if (o.chat) {
    json msgs = json::array();
    for (const ChatMessage& m : o.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
    body["messages"] = msgs;
    path = u.prefix + "/v1/chat/completions";
  } else {
    body["prompt"] = o.prompt;
    path = u.prefix + "/v1/completions";
  }

  const VllmCounters before = vllm_counters(cli, u, headers);
  RemoteResult out;
  std::string buf, err_body;
  bool done = false, first = true;
  int status = 0;
  const auto t0 = Clock::now();
  auto handle_event = [&](const std::string& data) {
    if (data == "[DONE]") {
      done = true;
      return;
    }
    const json e = json::parse(data, nullptr, false);
    if (e.is_discarded() || !e.is_object()) throw std::runtime_error("the endpoint sent an event that is not JSON: " + data.substr(0, 200));
    if (e.contains("error")) throw std::runtime_error("the endpoint reported an error: " + error_message(data));
    if (e.contains("choices") && e["choices"].is_array() && !e["choices"].empty()) {
      const json& c = e["choices"][0];
      std::string piece;
      if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") && c["delta"]["content"].is_string()) {
        piece = c["delta"]["content"].get<std::string>();
      } else if (c.contains("text") && c["text"].is_string()) {
        piece = c["text"].get<std::string>();
      }
      if (!piece.empty()) {
        if (first) out.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        first = false;
        out.text += piece;
        on_text(piece);
      }
      if (c.contains("finish_reason") && c["finish_reason"].is_string()) out.finish_reason = c["finish_reason"].get<std::string>();
    }
    if (e.contains("usage") && e["usage"].is_object()) out.usage = e["usage"];
    if (e.contains("timings") && e["timings"].is_object()) out.timings = e["timings"];
  };

  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers;
  req.headers.emplace("Accept", "text/event-stream");
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  bool cancelled = false;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (o.cancel && o.cancel->load()) {
      cancelled = true;
      return false;  // closes the stream: the server sees the client go and stops the request
    }
    if (status != 200) {
      err_body.append(data, len);
      return err_body.size() < (1 << 20);
    }
    buf.append(data, len);
    for (;;) {
      // Events end with a blank line ("\n\n" or "\r\n\r\n").
      size_t end = buf.find("\n\n");
      size_t skip = 2;
      const size_t crlf = buf.find("\r\n\r\n");
      if (crlf != std::string::npos && (end == std::string::npos || crlf < end)) {
        end = crlf;
        skip = 4;
      }
      if (end == std::string::npos) break;
      std::istringstream ev(buf.substr(0, end));
      buf.erase(0, end + skip);
      std::string line, data_line;
      while (std::getline(ev, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind("data:", 0) == 0) data_line += line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
      }
      if (!data_line.empty()) handle_event(data_line);
    }
    return true;
  };
  auto res = cli.send(req);
  if (cancelled) {
    out.finish_reason = "cancelled";
    out.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return out;
  }
  if (!res) {
    throw std::runtime_error("cannot reach the endpoint " + o.endpoint + ": " + describe_http_error(res.error()));
  }
  if (status != 200) {
    throw std::runtime_error("the endpoint " + o.endpoint + " answered HTTP " + std::to_string(status) + ": " +
                             error_message(err_body));
  }
  if (!done) throw std::runtime_error("the endpoint's stream ended without [DONE]");
  out.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (out.usage.is_object()) {
    out.n_prompt = out.usage.value("prompt_tokens", -1L);
    out.n_generated = out.usage.value("completion_tokens", -1L);
  }
  if (out.timings.is_object()) {
    if (out.n_prompt < 0) out.n_prompt = out.timings.value("prompt_n", -1L);
    if (out.n_generated < 0) out.n_generated = out.timings.value("predicted_n", -1L);
    if (out.timings.contains("draft_n")) {
      out.spec_source = "timings";
      out.n_drafted = out.timings.value("draft_n", 0L);
      out.n_accepted = out.timings.value("draft_n_accepted", 0L);
    }
  }
  if (out.spec_source.empty() && before.drafted >= 0) {
    const VllmCounters after = vllm_counters(cli, u, headers);
    if (after.drafted >= 0 && after.accepted >= 0) {
      out.spec_source = "vllm_metrics";
      out.n_drafted = static_cast<long>(after.drafted - before.drafted);
      out.n_accepted = static_cast<long>(after.accepted - std::max(0.0, before.accepted));
    }
  }
  return out;
}

}  // namespace specchat::remote

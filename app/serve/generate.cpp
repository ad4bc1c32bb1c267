// ApiServer::handle_generate: POST /v1/chat/completions and /v1/completions. Parses and
// validates the body, encodes the prompt (chat: the model's chat template, as
// `specchat-cli generate --chat`; completions: the raw prompt, as `--prompt`), hands a Job to the
// Scheduler (or, for "decode_mode": "pipo", to the PipoService) and answers with one JSON
// object or an SSE stream. PIPO responses carry "pipo" (pipo_service.h): every stream chunk the
// label, the final chunk and the whole object the reply's counters.
#include <httplib.h>

#include <chrono>
#include <ctime>

#include "app/serve/api_response.h"
#include "app/serve/client_socket.h"
#include "app/serve/http_server.h"
#include "app/serve/pipo_service.h"
#include "engine/utf8.h"

namespace specchat::serve {

using nlohmann::json;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(e.body().dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

const char* outcome_of(int status) {
  if (status == 499) return "cancelled";
  if (status == 503) return "rejected";
  return status >= 500 ? "error" : "invalid";
}

// What one request reports to the log and the metrics when it ends.
struct Ending {
  std::string outcome;
  int status = 200;
  std::string detail;  // finish reason or error code
};

}  // namespace

void ApiServer::handle_generate(const httplib::Request& req, httplib::Response& res, Endpoint ep) {
  const auto arrived = Clock::now();
  const uint64_t id = next_id_++;
  const std::string rid = (ep == Endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
  const char* route = ep == Endpoint::chat ? "chat" : "completion";
  auto refuse = [&](const ApiError& e) {
    send_error(res, e);
    metrics_.count_request(outcome_of(e.status));
    log_.info("request " + rid + " " + route + " refused: HTTP " + std::to_string(e.status) + " " +
              (e.code.empty() ? "error" : e.code) + " body_bytes=" + std::to_string(req.body.size()) +
              (cfg_.log_content ? " message=" + log_quote(e.message) : ""));
  };
  // cpp-httplib applies max_body_bytes to Content-Length only: a chunked body, or a gzip body
  // once inflated, arrives here whatever its size.
  if (req.body.size() > cfg_.max_body_bytes) {
    return refuse(ApiError{413, "the request body is too large (" + std::to_string(req.body.size()) +
                                    " bytes; the limit is " + std::to_string(cfg_.max_body_bytes) + ")",
                           "invalid_request_error", "", "body_too_large"});
  }
  if (!ready_) return refuse(ApiError{503, "loading the models", "unavailable_error", "", "loading"});
  auto parsed = parse_api_request(req.body, ep, cfg_, max_output_);
  if (auto* e = std::get_if<ApiError>(&parsed)) return refuse(*e);
  ApiRequest& a = std::get<ApiRequest>(parsed);
  if (a.mode == DecodeMode::pipo && !pipo_) {
    return refuse(ApiError{400,
                           "this server has no PIPO release loaded (`specchat-cli serve --pipo DIR`; in the app, "
                           "Settings \u203a PIPO), so \"decode_mode\": \"pipo\" is unavailable",
                           "invalid_request_error", "decode_mode", "pipo_unavailable"});
  }

  // A drafter the request names must be here: the CLI refuses a missing file too (a 200 with
  // plain decoding said so only in the server's log).
  if (a.drafter_named && a.mode == DecodeMode::lossless &&
      ((a.spec.drafter == DrafterChoice::block && !scheduler_.has_block_drafter()) ||
       (a.spec.drafter == DrafterChoice::mtp && !scheduler_.has_mtp_head()))) {
    const bool block = a.spec.drafter == DrafterChoice::block;
    return refuse(ApiError{400,
                           std::string("this server has no ") + (block ? "block drafter" : "MTP head") +
                               " (a " + (block ? "specchat-dflash" : "specchat-mtp") +
                               "-style GGUF bound to the served target, beside it), so \"drafter\": \"" +
                               (block ? "block" : "mtp") + "\" is unavailable",
                           "invalid_request_error", "drafter", "drafter_unavailable"});
  }

  auto job = std::make_shared<Job>();
  job->id = id;
  job->arrived = arrived;
  job->deadline = arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg_.timeout_s));
  try {
    job->req.prompt = ep == Endpoint::chat ? pair_.encode_chat(a.messages) : pair_.encode_prompt(a.prompt);
  } catch (const GenerationError& e) {
    return refuse(ApiError{400, e.what(), "invalid_request_error", ep == Endpoint::chat ? "messages" : "prompt", e.kind()});
  } catch (const std::exception& e) {
    return refuse(ApiError{400, std::string("the prompt could not be encoded: ") + e.what(), "invalid_request_error",
                           "", "invalid_prompt"});
  }
  const int n_prompt = static_cast<int>(job->req.prompt.size());
  if (n_prompt > max_input_) {
    return refuse(ApiError{400,
                           "the prompt is " + std::to_string(n_prompt) + " tokens; this server takes at most " +
                               std::to_string(max_input_) + " (context " + std::to_string(pair_.target->n_ctx()) + ")",
                           "invalid_request_error", ep == Endpoint::chat ? "messages" : "prompt",
                           "context_length_exceeded"});
  }
  job->req.max_tokens = a.max_tokens;
  job->req.sampling = a.sampling;
  job->req.stop_strings = a.stop;
  job->spec = a.spec;
  if (a.mode == DecodeMode::pipo) {
    job->pipo = true;
    job->pipo_threshold = a.acceptance_threshold >= 0 ? a.acceptance_threshold : pipo_->default_threshold();
    if (!pipo_->submit(job)) {
      return refuse(ApiError{503, "the PIPO unit is busy (1 running, " + std::to_string(cfg_.queue) + " queued); retry later",
                             "server_error", "", "queue_full"});
    }
  } else if (!scheduler_.submit(job)) {
    return refuse(ApiError{503, "the server is busy (" + std::to_string(cfg_.parallel) + " running, " +
                                    std::to_string(cfg_.queue) + " queued); retry later",
                           "server_error", "", "queue_full"});
  }

  ResponseMeta meta{ep, rid, static_cast<int64_t>(std::time(nullptr)), a.model.empty() ? cfg_.model_name : a.model};
  const int fd = find_client_socket(req.remote_addr, req.remote_port);
  const std::string prompt_text = cfg_.log_content ? log_quote(ep == Endpoint::chat ? a.messages.back().content : a.prompt) : "";

  // Logs and counts the end of the request (either mode).
  auto log_end = [this, rid, route, arrived, n_prompt, prompt_text, stream = a.stream](const Job& j, const Ending& end) {
    metrics_.count_request(end.outcome);
    metrics_.observe_e2e_ms(ms_since(arrived));
    const GenerationStats& s = j.result.stats;
    std::string line = "request " + rid + " " + route + (stream ? " stream" : "") + " HTTP " + std::to_string(end.status) +
                       " outcome=" + end.outcome + " finish=" + end.detail + " prompt_n=" + std::to_string(n_prompt) +
                       " predicted_n=" + std::to_string(s.n_generated) + " draft_n=" + std::to_string(s.n_drafted) +
                       " draft_n_accepted=" + std::to_string(s.n_accepted) + " steps=" + std::to_string(s.n_steps) +
                       " ttft_ms=" + std::to_string(static_cast<long>(j.ttft_ms)) +
                       " e2e_ms=" + std::to_string(static_cast<long>(ms_since(arrived)));
    if (j.pipo) {
      line += " mode=pipo approximate=true threshold=" + std::to_string(j.pipo_threshold);
      if (j.pipo_report.is_object()) {
        const json& p = j.pipo_report;
        line += " head_runs=" + std::to_string(p.value("head_runs", 0L)) +
                " token2_accepted=" + std::to_string(p.value("token2_accepted", 0L)) +
                " latent_length=" + std::to_string(p.value("latent_length", 0L));
      }
    }
    for (const std::string& w : j.warnings) line += " warning=" + log_quote(w);
    if (!prompt_text.empty()) line += " prompt=" + prompt_text + " reply=" + log_quote(j.result.text);
    log_.info(line);
  };
  auto ending_of = [](const Job& j) {
    if (j.error) return Ending{j.timed_out ? "timeout" : outcome_of(j.error->status), j.error->status, j.error->code};
    if (j.timed_out) return Ending{"timeout", 200, "timeout"};
    if (j.result.finish == FinishReason::cancelled) return Ending{"cancelled", 200, "cancelled"};
    return Ending{"ok", 200, finish_reason_name(j.result.finish)};
  };

  if (!a.stream) {
    std::unique_lock<std::mutex> l(job->m);
    while (!job->done) {
      job->cv.wait_for(l, std::chrono::milliseconds(50));
      if (!job->done && !job->cancel.load() && client_gone(fd)) job->cancel = true;  // ends soon; nobody reads it
    }
    job->released.clear();
    Ending end = ending_of(*job);
    if (job->error) {
      send_error(res, *job->error);
    } else if (job->timed_out) {
      end.status = 504;
      send_error(res, ApiError{504, "the request timed out after " + std::to_string(cfg_.timeout_s) + " s",
                               "server_error", "", "timeout"});
    } else {
      json body = completion_json(meta, job->result);
      if (job->pipo) body["pipo"] = job->pipo_report;
      res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    }
    if (job->cancel.load() && !job->timed_out) end = Ending{"cancelled", 499, "client_gone"};
    log_end(*job, end);
    return;
  }

  // Streaming: the provider is called repeatedly on this thread; each call waits up to 100 ms
  // for new text, writes it as chunks, and ends the stream once the job is done.
  struct StreamState {
    std::string pending;  // released text not yet sent (may end inside a UTF-8 character)
    size_t sent = 0;      // bytes of text sent
    bool first = true;
    bool ended = false;
  };
  auto st = std::make_shared<StreamState>();
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, st, meta, fd, log_end, ending_of](size_t, httplib::DataSink& sink) -> bool {
        bool done = false;
        {
          std::unique_lock<std::mutex> l(job->m);
          job->cv.wait_for(l, std::chrono::milliseconds(100), [&] { return job->done || !job->released.empty(); });
          st->pending += job->take_released();
          done = job->done;
        }
        if (!done && client_gone(fd)) {
          job->cancel = true;
          return false;
        }
        auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
        // A PIPO stream labels every chunk (a client reading any one of them sees it is approximate).
        auto chunk = [&](const std::string& text) {
          json c = chunk_json(meta, text, st->first, nullptr);
          if (job->pipo) c["pipo"] = pipo_label_json();
          return sse_event(c);
        };
        const size_t complete = done ? st->pending.size() : utf8_complete_prefix(st->pending);
        if (complete > 0 && !done) {
          if (!write(chunk(st->pending.substr(0, complete)))) {
            job->cancel = true;
            return false;
          }
          st->first = false;
          st->sent += complete;
          st->pending.erase(0, complete);
        }
        if (!done) return true;
        // The job is done (the scheduler wrote its last text before setting done).
        Ending end = ending_of(*job);
        bool ok = true;
        if (job->error) {
          ok = write(sse_event(job->error->body()));
        } else {
          const std::string& text = job->result.text;
          // The final text is the streamed bytes plus the rest (its tail sanitised, B17).
          const std::string rest = text.size() > st->sent ? text.substr(st->sent) : std::string();
          if (!rest.empty() || st->first) ok = write(chunk(rest));
          if (ok && job->timed_out) {
            ok = write(sse_event(ApiError{504, "the request timed out", "server_error", "", "timeout"}.body()));
          }
          if (ok) {
            json last = final_chunk_json(meta, job->result);
            if (job->pipo) last["pipo"] = job->pipo_report;
            ok = write(sse_event(last));
          }
        }
        if (ok) ok = write("data: [DONE]\n\n");
        st->ended = true;
        if (!ok) end = Ending{"cancelled", 499, "client_gone"};
        log_end(*job, end);
        if (ok) sink.done();
        return ok;
      },
      [job, st, log_end](bool) {
        // The connection ended before the stream did: the client went away.
        if (st->ended) return;
        job->cancel = true;
        std::unique_lock<std::mutex> l(job->m);
        job->cv.wait_for(l, std::chrono::seconds(30), [&] { return job->done; });
        st->ended = true;
        log_end(*job, Ending{"cancelled", 499, "client_gone"});
      });
}

}  // namespace specchat::serve

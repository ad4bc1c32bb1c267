// EngineWorker::generateRemote: a reply from an OpenAI-compatible server instead of the local
// engine (Settings › Engine; issue 14 §7), through the streaming client the CLI's --endpoint
// uses (app/remote/openai_client.h).
#include <algorithm>
#include <chrono>

#include "app/remote/openai_client.h"
#include "ui/engine_worker.h"

namespace specchat::ui {

namespace {

// The server's finish reason in the engine's words: "stop" (end of turn or a stop string) is
// what the app shows as a reply that ended by itself.
QString finish_from_server(const std::string& f) {
  if (f == "length") return QStringLiteral("length");
  if (f == "cancelled") return QStringLiteral("cancelled");
  return QStringLiteral("eos");
}

}  // namespace

void EngineWorker::generateRemote(const GenerateJob& job, const RemoteEngine& r, GenerationSummary& out) {
  remote::RemoteRequest req;
  req.endpoint = r.url.trimmed().toStdString();
  req.api_key = r.key.toStdString();
  req.model = r.model.trimmed().toStdString();
  req.chat = true;
  req.messages = job.messages;  // the server applies its own chat template and context policy
  req.max_tokens = job.settings.max_tokens;
  req.temperature = job.settings.sampling.temperature;
  req.top_p = job.settings.sampling.top_p;
  req.top_k = job.settings.sampling.top_k;
  req.seed = job.settings.sampling.seed;
  req.speculative = job.settings.draft_k > 0;
  req.cancel = &cancel_;
  out.speculative = req.speculative;
  LiveStats live;
  live.job_id = job.id;
  live.speculative = req.speculative;
  live.drafter = QStringLiteral("remote");
  live.device = QString::fromStdString(req.endpoint);
  const auto t0 = std::chrono::steady_clock::now();
  int step = 0;
  const quint64 id = job.id;
  const remote::RemoteResult res = remote::remote_generate(req, [&](const std::string& piece) {
    Q_EMIT tokenGenerated(id, QString::fromStdString(piece), false, step++);
  });
  out.text = QString::fromStdString(res.text);
  out.finish = finish_from_server(res.finish_reason);
  // What the server reported; times as this client measured them.
  GenerationStats& st = out.stats;
  st.n_prompt = static_cast<int>(std::max(0L, res.n_prompt));
  st.n_generated = static_cast<int>(res.n_generated >= 0 ? res.n_generated : step);
  st.n_drafted = static_cast<int>(res.n_drafted);
  st.n_accepted = static_cast<int>(res.n_accepted);
  st.ttft_ms = res.ttft_ms;
  st.decode_ms = std::max(0.0, res.total_ms - res.ttft_ms);
  if (res.timings.is_object()) {
    st.prefill_ms = res.timings.value("prompt_ms", 0.0);
    if (res.timings.contains("predicted_ms")) st.decode_ms = res.timings.value("predicted_ms", st.decode_ms);
    // τ as the server measured it gives the verification steps (llama-server and ours report it).
    const double tau = res.timings.value("mean_accepted_length", 0.0);
    if (tau > 0 && st.n_generated > 0) st.n_steps = std::max(1, static_cast<int>(st.n_generated / tau + 0.5));
  }
  live.stats = st;
  live.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  live.finished = true;
  Q_EMIT statsUpdated(live);
}

}  // namespace specchat::ui

// EngineWorker's live statistics (statsUpdated) and the compare run: the parts of the worker
// that watch a generation rather than set it up (engine_worker.cpp).
#include <QElapsedTimer>

#include <chrono>
#include <cstdio>
#include <exception>
#include <unistd.h>

#include "ui/engine_worker.h"
#include "engine/utf8.h"
#include "ui/pipo_engine.h"
#include "ui/spec_setup.h"

namespace specchat::ui {

namespace {

// Resident set size from /proc/self/statm (second field, in pages); 0 where unavailable.
size_t process_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  const long page = sysconf(_SC_PAGESIZE);
  return n == 2 && page > 0 ? static_cast<size_t>(resident) * static_cast<size_t>(page) : 0;
}

QString exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  } catch (...) {
    return QStringLiteral("unknown error");
  }
}

}  // namespace

void EngineWorker::fillMemory(LiveStats& live) const {
  live.rss_bytes = process_rss_bytes();
  if (!pair_) return;
  live.kv_bytes = pair_->target->kv_bytes() + (pair_->draft ? pair_->draft->kv_bytes() : 0) +
                  (pipo_ ? pipo_->unit.backbone->kv_bytes() : 0);
  const MemoryInfo m = pair_->target->memory();
  live.vram_used_bytes = m.on_device ? m.device_used_bytes : 0;
  live.vram_total_bytes = m.on_device ? m.device_total_bytes : 0;
  live.device = QString::fromStdString(pair_->target->device_name());
}

GenerationResult EngineWorker::runTracked(quint64 job_id, const GenerateRequest& req, const SpecSetup& setup,
                                          const TokenCallback& on_token) {
  LiveStats live;
  live.job_id = job_id;
  live.speculative = setup.speculative;
  live.drafter = setup.drafter;
  live.tree_mode = setup.tree_mode;
  live.node_budget = setup.node_budget;
  live.tree_depth = setup.depth;
  live.warnings = setup.warnings;
  const qint64 interval_ms = stats_interval_ms_.load();
  live.tps_history.reserve(static_cast<size_t>(std::max(0, req.max_tokens)));
  fillMemory(live);
  QElapsedTimer clock, since_emit;
  clock.start();
  since_emit.start();
  auto tracked = [&](const TokenEvent& ev) {
    if (on_token) on_token(ev);
    if (!ev.stats) return;
    live.tps_history.push_back(static_cast<float>(ev.stats->tokens_per_s()));
    if (since_emit.elapsed() < interval_ms) return;
    since_emit.restart();
    live.stats = *ev.stats;
    live.elapsed_ms = static_cast<double>(clock.nsecsElapsed()) / 1e6;
    fillMemory(live);
    Q_EMIT statsUpdated(live);
  };
  GenerationResult r = generator_->generate(req, tracked, &cancel_);
  live.stats = r.stats;
  live.elapsed_ms = static_cast<double>(clock.nsecsElapsed()) / 1e6;
  live.finished = true;
  fillMemory(live);
  Q_EMIT statsUpdated(live);
  return r;
}

void EngineWorker::compare(const CompareJob& job) {
  CompareResult out;
  out.job_id = job.id;
  out.conversation_id = job.conversation_id;
  out.prompt = job.prompt;
  out.settings = job.settings;
  out.greedy = job.settings.sampling.greedy();
  if (!beginJob(job.id)) {
    endJob();
    out.cancelled = true;
    Q_EMIT compareFinished(out);
    return;
  }
  QString error;
  if (!ensureLoaded(&error)) {
    endJob();
    out.error = QStringLiteral("No model loaded: %1").arg(error);
    Q_EMIT compareFinished(out);
    return;
  }
  try {
    std::vector<ChatMessage> messages;
    if (!job.system_prompt.trimmed().isEmpty()) messages.push_back({"system", job.system_prompt.toStdString()});
    messages.push_back({"user", job.prompt.toStdString()});
    GenerateRequest req;
    req.prompt = pair_->encode_chat(messages);
    req.max_tokens = job.settings.max_tokens;
    req.sampling = job.settings.sampling;
    const SpecSetup spec = plan_spec(job.settings, *pair_, features_, req.prompt);
    out.drafter = spec.drafter;
    out.tree_mode = spec.tree_mode;
    out.node_budget = spec.node_budget;
    out.warnings = spec.warnings;
    if (job.pipo) {
      out.warnings.clear();  // the second side is PIPO: the drafter settings play no part
    } else if (!spec.speculative) {
      out.warnings << QStringLiteral("the speculative side runs without a drafter");
    }
    SpecSetup base;
    base.drafter = QStringLiteral("none");
    base.tree_mode = QStringLiteral("none");
    base.spec.draft_k = 0;
    const SpecSetup* setups[2] = {&base, &spec};
    CompareSide* sides[2] = {&out.baseline, &out.speculative};
    {  // Neither side pays the cold start (weight pages, pool wake-up) alone.
      GenerateRequest w = req;
      w.spec = spec.spec;
      generator_->warm_up(w);
    }
    for (int side = 0; side < 2 && !cancel_.load(); ++side) {
      if (side == 1 && job.pipo) {  // baseline vs PIPO (approximate), from a cold PIPO cache
        comparePipoSide(job, messages, out);
        continue;
      }
      // Cold caches: both sides pay the same prefill, so TTFT and totals compare fairly.
      generator_->clear_cache();
      req.spec = setups[side]->spec;
      const quint64 id = job.id;
      auto on_token = [this, id, side](const TokenEvent& ev) {
        Q_EMIT compareToken(id, side, QString::fromStdString(ev.text), ev.drafted);
      };
      const auto t0 = std::chrono::steady_clock::now();
      GenerationResult r = runTracked(job.id, req, *setups[side], on_token);
      CompareSide& s = *sides[side];
      // RequestPlanner's CompareRun::total_ms: the generate call's wall time.
      s.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      s.text = QString::fromStdString(r.text);
      s.tokens = std::move(r.tokens);
      s.drafted = std::move(r.drafted);
      s.stats = r.stats;
      s.finish = QString::fromUtf8(finish_reason_name(r.finish));
      if (r.finish == FinishReason::cancelled) out.cancelled = true;
    }
    if (cancel_.load()) out.cancelled = true;
    finish_compare(out);
  } catch (...) {
    out.error = exception_message();
  }
  endJob();
  Q_EMIT compareFinished(out);
}

void EngineWorker::decodePieces(const PiecesRequest& request) {
  DecodedPieces out;
  out.message_id = request.message_id;
  if (!pair_ || request.ids.empty() || pair_->target->vocab().hash() != request.tokenizer_hash) {
    Q_EMIT piecesDecoded(out);
    return;
  }
  try {
    const Vocab& vocab = pair_->target->vocab();
    std::string bytes;
    size_t released = 0;
    int step = 0;
    for (size_t i = 0; i < request.ids.size(); ++i) {
      const bool drafted = i < request.drafted.size() && request.drafted[i] != 0;
      bytes += vocab.token_bytes(request.ids[i]);
      // Like the generator's stream: a token releases the text that is complete UTF-8 now.
      const size_t safe = i + 1 == request.ids.size() ? bytes.size() : utf8_complete_prefix(bytes);
      out.texts << (safe > released ? QString::fromStdString(utf8_sanitize(bytes.substr(released, safe - released)))
                                    : QString());
      released = std::max(released, safe);
      out.drafted.push_back(drafted ? 1 : 0);
      out.steps.push_back(step);
      if (!drafted) ++step;  // the target's own token closes its verification step
    }
    out.ok = true;
  } catch (...) {
    out = DecodedPieces{};
    out.message_id = request.message_id;
  }
  Q_EMIT piecesDecoded(out);
}

}  // namespace specchat::ui

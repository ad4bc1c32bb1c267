// EngineWorker's PIPO mode (docs/design/pipo.md, issue 16): the release unit bound to the loaded
// target, chat replies generated with a PipoSession kept across turns (each turn continues the
// stored latents when it can: pipo_history.h), and the PIPO side of a compare run. PIPO is
// APPROXIMATE: a reply says so (GenerationSummary::pipo → MessageStats mode "pipo"), and a unit
// that cannot be loaded fails the request with its reason instead of decoding plainly.
#include <QElapsedTimer>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <span>
#include <stdexcept>

#include "engine/chat_context.h"
#include "engine/pipo/pipo_history.h"
#include "engine/utf8.h"
#include "ui/engine_worker.h"
#include "ui/pipo_engine.h"

namespace specchat::ui {

namespace {

QString exception_text() {
  try {
    throw;
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  } catch (...) {
    return QStringLiteral("unknown error");
  }
}

// Text of a token stream as the generator releases it: each token gives the UTF-8 that is
// complete after it (may be empty).
class TokenText {
 public:
  explicit TokenText(const Vocab& v) : v_(v) {}
  QString push(int32_t id) {
    bytes_ += v_.token_bytes(id);
    const size_t safe = utf8_complete_prefix(bytes_);
    QString out;
    if (safe > released_) out = QString::fromStdString(utf8_sanitize(bytes_.substr(released_, safe - released_)));
    released_ = std::max(released_, safe);
    return out;
  }
  std::string text() const { return utf8_sanitize(bytes_); }

 private:
  const Vocab& v_;
  std::string bytes_;
  size_t released_ = 0;
};

// finish_reason_name() of pipo_generate's stop reason.
QString finish_of(const std::string& stop_reason) {
  if (stop_reason == "stop") return QString::fromUtf8(finish_reason_name(FinishReason::eos));
  if (stop_reason == "context") return QString::fromUtf8(finish_reason_name(FinishReason::context_full));
  if (stop_reason == "cancelled") return QString::fromUtf8(finish_reason_name(FinishReason::cancelled));
  return QString::fromUtf8(finish_reason_name(FinishReason::length));
}

// The fidelity gauge's figures so far into the live panel's (nothing when it is off).
void copy_fidelity(const PipoFidelity* f, PipoLive& p) {
  if (!f) return;
  p.fidelity_every = f->every;
  p.fidelity_samples = f->samples;
  p.fidelity_mean_kl = f->mean_kl();
  p.fidelity_max_kl = f->kl_max;
}

// The threshold a choice asks for: its own, else the release's recommendation.
float threshold_of(const PipoChoice& c, const PipoUnit& u) {
  return c.threshold >= 0 ? c.threshold : u.info.recommended_threshold;
}

// One PIPO reply on `s` from `pairs`: streams each visible token to `on_text`, fills `live` (and
// its GenerationStats mapping) as it goes and `sink` every step; returns the reply and its
// visible tokens / text. Prefill (the sync) is timed apart so decode tokens/s means what it
// means for the other modes. Throws as PipoSession::sync / pipo_generate.
struct PipoRun {
  PipoReply reply;
  std::vector<int32_t> visible;
  std::string text;
};
PipoRun run_pipo(PipoSession& s, const PipoUnit& u, const std::vector<int32_t>& pairs, const PipoGenerateOptions& base,
                 const std::atomic<bool>& cancel, LiveStats& live,
                 const std::function<void(const QString&, int)>& on_text, const std::function<void()>& sink) {
  const Vocab& v = u.backbone->vocab();
  PipoGenerateOptions g = base;
  const int prompt_pairs = static_cast<int>(pairs.size() / 2);
  const int latent = g.settings.latent_context(s.n_ctx());
  const int raw_limit = g.settings.raw_limit(s.n_ctx());
  if (prompt_pairs >= latent || raw_length(pairs) >= raw_limit) {
    throw std::length_error("PIPO: the conversation is " + std::to_string(raw_length(pairs)) + " raw tokens in " +
                            std::to_string(prompt_pairs) + " pairs; PIPO's context holds " + std::to_string(raw_limit) +
                            " raw tokens in " + std::to_string(latent) +
                            " pairs, with room for the reply (start a new conversation)");
  }
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const int reused = s.sync(pairs);  // the prefill: pipo_generate's own sync then keeps every pair
  const double prefill_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  PipoRun out;
  TokenText text(v);
  PipoLive& p = live.pipo_live;
  p.prompt_pairs = prompt_pairs;
  p.reused_pairs = reused;
  GenerationStats& st = live.stats;
  st.n_prompt = raw_length(pairs);
  st.n_prompt_cached = raw_length(std::span<const int32_t>(pairs).first(static_cast<size_t>(2 * reused)));
  st.prefill_ms = prefill_ms;
  const auto t_decode = clock::now();
  int step = 0, first_step_tokens = 0;
  g.on_tokens = [&](std::span<const int32_t> raw) {
    const double since_ms = std::chrono::duration<double, std::milli>(clock::now() - t_decode).count();
    if (step == 0) {
      st.ttft_ms = prefill_ms + since_ms;
      p.ttft_ms = st.ttft_ms;
      first_step_tokens = static_cast<int>(raw.size());
    }
    ++p.steps;
    // Running figures (the exact head runs come with the reply): below threshold 1 every step
    // that does not end the turn runs token 2's heads.
    if (g.settings.acceptance_threshold < 1.0f) p.head_runs = p.steps;
    if (raw.size() == 2) ++p.accepted;
    p.raw_tokens += static_cast<long>(raw.size());
    for (int32_t id : raw) {
      if (v.is_eog(id)) continue;  // the end of turn ends the reply; it is not shown
      out.visible.push_back(id);
      on_text(text.push(id), step);
      st.n_generated = static_cast<int>(out.visible.size());
      st.decode_ms = since_ms;
      live.tps_history.push_back(static_cast<float>(st.tokens_per_s()));
    }
    const long rest = p.raw_tokens - first_step_tokens;
    if (rest > 0) p.tpot_ms = (since_ms - (st.ttft_ms - prefill_ms)) / static_cast<double>(rest);
    st.n_steps = static_cast<int>(p.steps);
    st.n_target_tokens = static_cast<int>(p.raw_tokens);
    p.latent_length = prompt_pairs + static_cast<int>(p.steps);
    p.raw_length = st.n_prompt + static_cast<int>(p.raw_tokens);
    ++step;
    copy_fidelity(g.fidelity, p);
    sink();
    return !cancel.load();
  };
  out.reply = pipo_generate(s, pairs, g);
  copy_fidelity(g.fidelity, p);
  const PipoReply& r = out.reply;
  // The reply's own figures win over the running ones (the head runs are only known here).
  p.steps = r.counters.steps;
  p.head_runs = r.counters.head_runs;
  p.accepted = r.counters.accepted;
  p.raw_tokens = r.counters.raw_tokens;
  p.latent_length = prompt_pairs + static_cast<int>(r.new_pairs.size() / 2);
  p.raw_length = st.n_prompt + static_cast<int>(r.counters.raw_tokens);
  const long rest = r.counters.raw_tokens - r.first_step_tokens;
  p.tpot_ms = rest > 0 ? 1000.0 * (r.total_s - r.ttft_s) / static_cast<double>(rest) : 0.0;
  st.ttft_ms = prefill_ms + 1000.0 * r.ttft_s;
  p.ttft_ms = st.ttft_ms;
  st.decode_ms = 1000.0 * r.total_s;
  st.n_steps = static_cast<int>(r.counters.steps);
  st.n_drafted = static_cast<int>(r.counters.head_runs);
  st.n_accepted = static_cast<int>(r.counters.accepted);
  st.n_target_tokens = static_cast<int>(r.counters.raw_tokens);
  st.n_generated = static_cast<int>(out.visible.size());
  out.text = text.text();
  return out;
}

}  // namespace

void EngineWorker::setPipo(const PipoChoice& choice) {
  if (shutdown_.load()) return;
  const bool server_pipo_changed = server_ && (choice.enabled != pipo_choice_.enabled || choice.release != pipo_choice_.release ||
                                               choice.threshold != pipo_choice_.threshold);
  pipo_choice_ = choice;
  if (server_pipo_changed) {  // the app's server serves PIPO as the settings say: restart it
    stopServer();
    startServer();
  }
  if (!choice.enabled) {
    freePipo();
    return;
  }
  if (!pair_) {  // loaded with the models (ensureLoaded)
    PipoStatus st;
    st.enabled = true;
    st.folder = pipo_release_folder(choice);
    Q_EMIT pipoStatusChanged(st);
    return;
  }
  try {
    loadPipo(choice);
  } catch (...) {
    Q_EMIT errorOccurred(exception_text());
  }
}

void EngineWorker::freePipo() {
  pipo_.reset();
  Q_EMIT pipoStatusChanged(PipoStatus{});
}

void EngineWorker::loadPipo(const PipoChoice& c) {
  PipoStatus st;
  st.enabled = true;
  st.folder = pipo_release_folder(c);
  const std::string folder = st.folder.toStdString();
  try {
    if (!pair_) throw ModelError("PIPO needs the target model, which is not loaded");
    const int raw_limit = c.raw_context > 0 ? c.raw_context : pair_->target->n_ctx();
    const std::string target = pair_->target->path();
    if (pipo_ && pipo_->folder == folder && pipo_->raw_limit == raw_limit && pipo_->plain_target == target &&
        pipo_->fidelity_every == c.fidelity_every) {
      const float thr = threshold_of(c, pipo_->unit);
      if (thr != pipo_->settings.acceptance_threshold) {
        PipoSettings ps = pipo_->settings;
        ps.acceptance_threshold = thr;
        ps.validate();
        pipo_->settings = ps;
        pipo_->status.threshold = thr;
        Q_EMIT pipoStatusChanged(pipo_->status);
      }
      return;
    }
    pipo_.reset();
    if (folder.empty()) {
      throw PipoError(PipoErrorKind::manifest,
                      "no release folder: choose one in Settings \u203a PIPO (no release is bundled with these models)");
    }
    PipoLoadOptions lo;
    lo.plain_target = target;  // a release made from another target is refused (target_mismatch)
    lo.backbone.backend = static_cast<BackendKind>(target_backend_.load());
    lo.backbone.n_threads = options_.n_threads;
    lo.backbone.kv_type = options_.kv_type;
    lo.backbone.activations = options_.activations;
    auto e = std::make_unique<PipoEngine>();
    e->unit = load_pipo_release(folder, lo);
    PipoSettings ps;
    ps.raw_context = raw_limit;
    ps.acceptance_threshold = threshold_of(c, e->unit);
    ps.validate();
    // The backbone's cache holds pairs: min(its trained context, the raw limit) of them.
    const int latent = ps.latent_context(e->unit.backbone->config().n_ctx_train);
    if (latent < e->unit.backbone->n_ctx()) {
      lo.backbone.n_ctx = latent;  // a smaller KV pool for a shorter raw limit
      e->unit = load_pipo_release(folder, lo);
    }
    e->tokenizer = std::make_unique<Tokenizer>(e->unit.backbone->vocab());
    e->folder = folder;
    e->plain_target = target;
    e->raw_limit = raw_limit;
    e->settings = ps;
    if (c.fidelity_every > 0) {
      LlamaModel::Options po;
      po.n_threads = options_.n_threads;
      po.backend = lo.backbone.backend;
      po.kv_type = options_.kv_type;
      po.activations = options_.activations;
      po.n_ctx = std::min(raw_limit, pair_->target->n_ctx());
      e->plain = LlamaModel::load(target, po);
      e->fidelity_every = c.fidelity_every;
    }
    st.loaded = true;
    st.release = QString::fromStdString(e->unit.info.release);
    st.backbone = QString::fromStdString(e->unit.backbone->path());
    st.mtp_head = QString::fromStdString(e->unit.mtp->path());
    st.io = e->unit.io ? QString::fromStdString(e->unit.io->path()) : QString();
    st.compressor = st.confidence_head = !st.io.isEmpty();
    st.threshold = ps.acceptance_threshold;
    st.raw_context = ps.raw_limit(e->unit.backbone->n_ctx());
    st.latent_context = ps.latent_context(e->unit.backbone->n_ctx());
    st.quality_json = QString::fromStdString(e->unit.info.quality_json);
    e->status = st;
    pipo_ = std::move(e);
  } catch (...) {
    pipo_.reset();
    st.loaded = false;
    st.error = exception_text();
    Q_EMIT pipoStatusChanged(st);
    throw;
  }
  Q_EMIT pipoStatusChanged(st);
}

void EngineWorker::generatePipo(const GenerateJob& job, GenerationSummary& out) {
  out.pipo = true;
  loadPipo(job.settings.pipo);  // throws (with pipoStatusChanged) when the unit is refused
  PipoEngine& e = *pipo_;
  const Vocab& v = e.unit.backbone->vocab();
  const ChatEncoding enc{&v, e.tokenizer.get(), pair_->template_name};
  const ChatContext cc = build_chat_context(enc, job_context(job));
  // The stored latents continue the conversation when they are this release's, nothing lossless
  // came after them, and their raw ids begin this prompt; otherwise the context is re-prefilled
  // in pairs and the app says so (switching modes is explicit).
  const PipoHistory& h = job.pipo_history;
  bool usable = h.found;
  if (usable) {
    try {
      check_pair_sequence(h.pairs, e.unit.backbone->config().n_vocab);
    } catch (const std::invalid_argument&) {
      usable = false;
    }
  }
  PipoContinuation plan = plan_pipo_turn(usable ? &h.pairs : nullptr, h.release, h.later_lossless || (h.found && !usable),
                                         e.unit.info.release, cc.prompt);
  if (h.found && !usable) plan.note = "PIPO: the stored latents do not fit this model; the context is re-prefilled in pairs";
  out.pipo_note = QString::fromStdString(plan.note);
  if (!plan.note.empty()) Q_EMIT pipoNote(job.id, out.pipo_note);
  if (!e.session) e.session = std::make_unique<PipoSession>(e.unit);

  PipoGenerateOptions g;
  g.max_tokens = job.settings.max_tokens;
  g.sampling = job.settings.sampling;
  g.settings = e.settings;
  g.stop_ids.push_back(v.eos_id);
  if (v.eot_id >= 0) g.stop_ids.push_back(v.eot_id);
  PipoFidelity fidelity;  // this reply's samples (Settings › PIPO › Fidelity gauge)
  fidelity.plain = e.plain.get();
  fidelity.every = e.fidelity_every;
  g.fidelity = e.plain ? &fidelity : nullptr;

  LiveStats live;
  live.job_id = job.id;
  live.pipo = true;
  live.drafter = QStringLiteral("PIPO");
  live.tree_mode = QStringLiteral("none");
  PipoLive& p = live.pipo_live;
  p.release = QString::fromStdString(e.unit.info.release);
  p.from_latents = plan.from_latents;
  p.threshold = e.settings.acceptance_threshold;
  p.raw_context = e.status.raw_context;
  p.latent_context = e.status.latent_context;
  fillMemory(live);
  QElapsedTimer clock, since_emit;
  clock.start();
  since_emit.start();
  const qint64 interval_ms = stats_interval_ms_.load();
  const quint64 id = job.id;
  auto on_text = [this, id](const QString& t, int step) { Q_EMIT tokenGenerated(id, t, false, step); };
  auto sink = [&] {
    if (since_emit.elapsed() < interval_ms) return;
    since_emit.restart();
    live.elapsed_ms = static_cast<double>(clock.nsecsElapsed()) / 1e6;
    fillMemory(live);
    Q_EMIT statsUpdated(live);
  };
  PipoRun run;
  try {
    run = run_pipo(*e.session, e.unit, plan.pairs, g, cancel_, live, on_text, sink);
  } catch (...) {
    e.session.reset();  // its cache may hold a half-fed step: the next reply starts it afresh
    throw;
  }
  live.elapsed_ms = static_cast<double>(clock.nsecsElapsed()) / 1e6;
  live.finished = true;
  fillMemory(live);
  Q_EMIT statsUpdated(live);

  out.text = QString::fromStdString(run.text);
  out.tokens = run.visible;
  out.drafted.assign(run.visible.size(), 0);  // nothing here was verified by the target
  out.finish = finish_of(run.reply.stop_reason);
  out.stats = live.stats;
  out.pipo_live = live.pipo_live;
  out.tokenizer_hash = v.hash();
  out.template_name = QString::fromStdString(pair_->template_name);
  out.pipo_pairs = plan.pairs;
  out.pipo_pairs.insert(out.pipo_pairs.end(), run.reply.new_pairs.begin(), run.reply.new_pairs.end());
}

void EngineWorker::comparePipoSide(const CompareJob& job, const std::vector<ChatMessage>& messages, CompareResult& out) {
  out.pipo = true;
  loadPipo(job.settings.pipo);
  PipoEngine& e = *pipo_;
  const Vocab& v = e.unit.backbone->vocab();
  const std::vector<int32_t> prompt = encode_chat_ids(v, *e.tokenizer, pair_->template_name, messages);
  out.drafter = QStringLiteral("PIPO");
  out.tree_mode = QStringLiteral("none");
  out.node_budget = 0;
  out.pipo_quality_json = e.status.quality_json;
  PipoGenerateOptions g;
  g.max_tokens = job.settings.max_tokens;
  g.sampling = job.settings.sampling;
  g.settings = e.settings;
  g.stop_ids.push_back(v.eos_id);
  if (v.eot_id >= 0) g.stop_ids.push_back(v.eot_id);
  // A cold cache, as the baseline's: a session of its own on the backbone's sequence 0, so the
  // chat's session no longer matches that cache and starts afresh on its next reply.
  e.session.reset();
  const std::vector<int32_t> pairs = pair_align_ids(prompt);
  {  // Warm-up (weight pages, pool): one token on a throwaway session, like the baseline's.
    PipoSession warm(e.unit);
    PipoGenerateOptions w = g;
    w.max_tokens = 1;
    (void)pipo_generate(warm, pairs, w);
  }
  PipoSession cold(e.unit);
  LiveStats live;
  live.job_id = job.id;
  live.pipo = true;
  live.drafter = QStringLiteral("PIPO");
  PipoLive& p = live.pipo_live;
  p.release = QString::fromStdString(e.unit.info.release);
  p.threshold = e.settings.acceptance_threshold;
  p.raw_context = e.status.raw_context;
  p.latent_context = e.status.latent_context;
  QElapsedTimer since_emit;
  since_emit.start();
  const qint64 interval_ms = stats_interval_ms_.load();
  const quint64 id = job.id;
  auto on_text = [this, id](const QString& t, int) { Q_EMIT compareToken(id, 1, t, false); };
  auto sink = [&] {
    if (since_emit.elapsed() < interval_ms) return;
    since_emit.restart();
    Q_EMIT statsUpdated(live);
  };
  const auto t0 = std::chrono::steady_clock::now();
  const PipoRun run = run_pipo(cold, e.unit, pairs, g, cancel_, live, on_text, sink);
  CompareSide& s = out.speculative;
  s.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  s.text = QString::fromStdString(run.text);
  s.tokens = run.visible;
  s.drafted.assign(run.visible.size(), 0);
  s.stats = live.stats;
  s.finish = finish_of(run.reply.stop_reason);
  if (run.reply.stop_reason == "cancelled") out.cancelled = true;
  out.pipo_live = live.pipo_live;
  live.finished = true;
  Q_EMIT statsUpdated(live);
}

}  // namespace specchat::ui

// The engine side of the app: a QObject that owns the models and the generator and lives on
// its own QThread (STYLE.md §8, after gpt4all's ChatLLM). The GUI talks to it only through
// queued signals carrying value types (engine_types.h); the one exception is stop()/shutdown(),
// plain thread-safe calls, because a running generate() keeps the worker's event loop busy.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>

#include <atomic>
#include <memory>
#include <mutex>

#include "engine/drafters/install.h"
#include "engine/model_pair.h"
#include "engine/runtime/turn_lock.h"
#include "ui/bench_types.h"
#include "ui/engine_types.h"

namespace specchat::ui {

struct SpecSetup;  // ui/spec_setup.h
struct PipoEngine;  // ui/pipo_engine.h
class LocalServer;  // ui/local_server.h

// Owns a ModelPair and a Generator (KV prefix reuse across turns). Every slot catches all
// exceptions and turns them into errorOccurred(): nothing a user does can crash the app.
// Slots must run on the worker's thread (call them through queued connections).
class EngineWorker : public QObject {
  Q_OBJECT

 public:
  explicit EngineWorker(QObject* parent = nullptr);
  ~EngineWorker() override;

  // Thread-safe. Cancels job `job_id` whether it is running or still queued; other jobs are
  // unaffected. A cancelled job still emits generationFinished (finish "cancelled"), with
  // whatever it had generated.
  void stop(quint64 job_id);
  // Thread-safe. Cancels the running job and makes every later slot return at once (used
  // before the thread is stopped, so closing the window never waits for a long reply).
  void shutdown();
  // Thread-safe: whether a model pair is loaded now.
  bool hasModels() const { return loaded_.load(); }
  // Thread-safe. The chat template the next loadModels uses: "" = the one recognised in the
  // target's file (else ChatML with a notice in ModelInfo::warnings), or a name of
  // chat_template_names() (engine/chat_template.h); an unknown name makes that load fail.
  void setChatTemplate(const QString& name) {
    std::lock_guard<std::mutex> lock(remote_mu_);
    chat_template_ = name.toStdString();
  }
  // Thread-safe. How the next loadModels computes: `kv_type` "f16" | "f32" (the KV cache's
  // element type) and `activations` "q8" | "f32" (quantized matrices with 8-bit or f32
  // activations), as the CLI's --kv-type and --activations; other values keep the defaults.
  void setCompute(const QString& kv_type, const QString& activations) {
    std::lock_guard<std::mutex> lock(remote_mu_);
    kv_f32_ = kv_type == QLatin1String("f32");
    activations_f32_ = activations == QLatin1String("f32");
  }
  // Thread-safe. Where the next generate() gets its reply: the local engine (default) or an
  // OpenAI-compatible server (engine_worker_remote.cpp). Compare, the context meter and token
  // pieces stay local.
  void setRemote(const RemoteEngine& r) {
    std::lock_guard<std::mutex> lock(remote_mu_);
    remote_ = r;
  }
  RemoteEngine remote() const {
    std::lock_guard<std::mutex> lock(remote_mu_);
    return remote_;
  }
  // Thread-safe. Least time between two running statsUpdated snapshots (default 50 ms; 0 =
  // one per token, for tests and screenshots).
  void setStatsIntervalMs(int ms) { stats_interval_ms_.store(ms); }

 public Q_SLOTS:
  // Loads (or replaces) the model pair. `target` empty = the bundled target; `draft` empty =
  // no draft model. Emits modelsLoading, then modelsLoaded or errorOccurred (the message names
  // the file and what is wrong: missing file, bad GGUF, vocabulary mismatch).
  void loadModels(const QString& target, const QString& draft);
  // Thread-safe. Where the next loadModels puts the target and the draft (default: CPU). CUDA
  // without a device (or in a CPU-only build) makes that load fail with a clear error.
  void setBackends(BackendKind target, BackendKind draft) {
    target_backend_.store(static_cast<int>(target));
    draft_backend_.store(static_cast<int>(draft));
  }
  // Generates one reply. Loads the last requested pair first when none is loaded (lazy start,
  // and a retry after a failed load). Emits tokenGenerated per token, then generationFinished.
  // With job.settings.pipo.enabled (and a local engine) the reply is generated in the
  // approximate PIPO mode (engine_worker_pipo.cpp): the release unit is loaded (checked against
  // the loaded target) if it is not, and a refused or missing release fails the request with
  // its reason (finish "error"): it never falls back to plain decoding.
  void generate(const specchat::ui::GenerateJob& job);
  // Settings › PIPO (engine_worker_pipo.cpp): remembered for the next model load; with models
  // loaded, an enabled choice loads the release unit now (bound to the loaded target) and a
  // disabled one frees it. Emits pipoStatusChanged (which parts loaded, or why not; an error
  // also as errorOccurred).
  void setPipo(const specchat::ui::PipoChoice& choice);
  // Runs `job.prompt` baseline (no drafter), then speculative with job.settings, each from a
  // cold KV cache. Streams both sides through compareToken and statsUpdated, then emits
  // compareFinished once (also on error, cancellation through stop(job.id), or no models).
  // job.pipo: the second side is PIPO (job.settings.pipo; approximate) from a cold PIPO cache,
  // and the result carries its figures, the divergence from baseline and the release's quality.
  // Use ids that do not collide with generate()'s (e.g. with bit 62 set).
  void compare(const specchat::ui::CompareJob& job);
  // Decodes a stored reply into per-token pieces; emits piecesDecoded (ok false when no
  // models are loaded or the tokenizer hash differs). Never loads models itself.
  void decodePieces(const specchat::ui::PiecesRequest& request);
  // Counts the tokens of a prospective prompt for the context meter; emits contextMeasured
  // (ok false when no models are loaded). Never loads models itself (engine_worker_context.cpp).
  void measureContext(const specchat::ui::ContextRequest& request);
  // Runs a benchmark sweep (engine_worker_bench.cpp) on a pair of its own, loaded like the
  // chat's (same files and backends, KV room for the highest concurrency) and freed at the end,
  // so the chat's KV cache and prefix reuse stay as they were; chat replies queue behind it.
  // Emits benchProgress after each configuration of a wave, benchUpdated after each wave (at
  // most every ~300 ms, and the last one), then benchFinished once (also on error). stop(job.id)
  // ends it after the running wave.
  void runBench(const specchat::ui::BenchJob& job);
  // Settings › Server (engine_worker_server.cpp): serves the loaded models over the OpenAI API
  // (LocalServer) while `s.enabled`, with the chat on KV sequence 0 and the server on
  // s.parallel more; the models are reloaded when that changes the pool's size (the chat's KV
  // prefix is then lost once). Without loaded models the server starts after the next load.
  // Emits serverStateChanged (running with its URL, stopped, or the reason it could not start:
  // a non-loopback address without a key, a port in use).
  void setServer(const specchat::ui::ServerSettings& s);

 Q_SIGNALS:
  void modelsLoading(const QString& description);
  void modelsLoaded(const specchat::ui::ModelInfo& info);
  void errorOccurred(const QString& message);
  // One emitted token: `text` is the newly complete UTF-8 it releases (may be empty);
  // `drafted` = proposed by the drafter and accepted by the target; `step` = the target
  // verification step that emitted it (from 0).
  void tokenGenerated(quint64 job_id, const QString& text, bool drafted, int step);
  // Running statistics of job `job_id` for the live panel: at most every ~50 ms while it
  // generates, and once more (finished = true) before generationFinished.
  void statsUpdated(const specchat::ui::LiveStats& stats);
  void generationFinished(const specchat::ui::GenerationSummary& summary);
  // Compare runs: `side` 0 = baseline, 1 = speculative; `text` as in tokenGenerated.
  void compareToken(quint64 job_id, int side, const QString& text, bool drafted);
  void compareFinished(const specchat::ui::CompareResult& result);
  void piecesDecoded(const specchat::ui::DecodedPieces& pieces);
  void contextMeasured(const specchat::ui::ContextUsage& usage);
  // Benchmark: requests done of `total` after `elapsed_s` wall seconds.
  void benchProgress(quint64 job_id, qint64 done, qint64 total, double elapsed_s);
  // Benchmark: every request recorded so far (identity with baseline checked), for live plots.
  void benchUpdated(quint64 job_id, const specchat::bench::BenchRun& so_far);
  void benchFinished(const specchat::ui::BenchResult& result);
  // The app's server started, stopped or failed to start (setServer, and around model loads).
  void serverStateChanged(const specchat::ui::ServerState& state);
  // PIPO's release unit loaded, failed to load (status.error) or was freed (setPipo, model
  // loads, a PIPO request).
  void pipoStatusChanged(const specchat::ui::PipoStatus& status);
  // PIPO job `job_id` re-prefills its context instead of continuing stored latents: why
  // (plan_pipo_turn's note), before its first token.
  void pipoNote(quint64 job_id, const QString& note);

 private:
  bool ensureLoaded(QString* error);  // worker thread; false when no pair could be loaded
  void unload();
  bool beginJob(quint64 job_id);      // registers the running job; false when already cancelled
  void endJob();
  // Runs `req` on the generator, forwarding each token to on_token and emitting statsUpdated
  // for job_id at most every ~50 ms and once (finished) at the end. Throws what generate throws.
  GenerationResult runTracked(quint64 job_id, const GenerateRequest& req, const SpecSetup& setup,
                              const TokenCallback& on_token);
  void fillMemory(LiveStats& live) const;  // RSS, KV bytes, VRAM, device name
  // KV sequences the pair needs: the chat's one, plus the server's while it is enabled.
  int sequencesWanted() const;
  void startServer();  // when enabled and loaded; emits serverStateChanged
  void stopServer();   // emits serverStateChanged when one was running
  // generate() against the remote engine `r`: the job's messages go to its chat endpoint, text
  // streams back as tokenGenerated (one event per piece, never drafted: a server sends no ids),
  // statistics come from its usage/timings. The summary has no token ids (the next context is
  // built from text) and finish "eos" for the server's "stop".
  void generateRemote(const GenerateJob& job, const RemoteEngine& r, GenerationSummary& out);
  // PIPO (engine_worker_pipo.cpp). loadPipo: makes pipo_ the unit `c` names, bound to the loaded
  // pair's target (kept when already loaded with the same folder and context); emits
  // pipoStatusChanged and rethrows PipoError / ModelError / GgufError when it cannot.
  void loadPipo(const PipoChoice& c);
  void freePipo();  // emits pipoStatusChanged (disabled) when a unit was loaded
  // generate() in PIPO mode: fills `out` (pipo = true); throws what loadPipo, build_chat_context
  // and pipo_generate throw (std::length_error for a conversation longer than PIPO's context).
  void generatePipo(const GenerateJob& job, GenerationSummary& out);
  // compare() with a PIPO second side: fills out.speculative with PIPO's reply; throws as above.
  void comparePipoSide(const CompareJob& job, const std::vector<ChatMessage>& messages, CompareResult& out);

  PairOptions options_;               // last requested pair
  std::atomic<int> target_backend_{static_cast<int>(BackendKind::cpu)};
  std::atomic<int> draft_backend_{static_cast<int>(BackendKind::cpu)};
  // The chat's engine and the app server's take turns on it (EngineShare); outlives both.
  TurnLock turns_;
  std::unique_ptr<ModelPair> pair_;   // heap: the generator keeps references into it
  std::unique_ptr<Generator> generator_;  // the chat: KV sequence 0 of the pair
  ServerSettings server_settings_;         // Settings › Server (worker thread)
  std::unique_ptr<LocalServer> server_;    // running app server (sequences 1..parallel)
  FeatureDrafters features_;  // the block drafter / MTP head found beside the target (optional)
  PipoChoice pipo_choice_;             // Settings › PIPO (worker thread)
  std::unique_ptr<PipoEngine> pipo_;   // the loaded release unit and the chat's PIPO session
  std::atomic<bool> loaded_{false};

  // Cancellation bookkeeping, shared with the GUI thread. The mutex guards the ids only (never
  // the models); cancel_ is what the generator polls.
  std::mutex cancel_mu_;
  quint64 running_job_ = 0;
  quint64 cancelled_job_ = 0;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> shutdown_{false};
  std::atomic<int> stats_interval_ms_{50};  // live panel refresh: smooth, yet cheap to paint
  mutable std::mutex remote_mu_;
  RemoteEngine remote_;  // guarded by remote_mu_
  std::string chat_template_;  // guarded by remote_mu_
  bool kv_f32_ = false, activations_f32_ = false;  // setCompute; guarded by remote_mu_
};

// Owns the engine thread and the worker living on it: starts the thread on construction;
// on destruction cancels any reply, stops the thread and lets the worker (and the models) be
// deleted on it. One per application window set; no globals.
class EngineHost {
 public:
  EngineHost();
  ~EngineHost();
  EngineHost(const EngineHost&) = delete;
  EngineHost& operator=(const EngineHost&) = delete;

  EngineWorker* worker() const { return worker_; }
  // Queues EngineWorker::loadModels on the engine thread.
  void loadModels(const QString& target, const QString& draft);

 private:
  QThread thread_;
  EngineWorker* worker_;  // deleted on its own thread when thread_ finishes
};

}  // namespace specchat::ui

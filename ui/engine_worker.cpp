#include "ui/engine_worker.h"

#include <QFileInfo>
#include <QMetaObject>

#include <exception>

#include "engine/runtime/request_planner.h"
#include "ui/local_server.h"
#include "ui/pipo_engine.h"
#include "ui/spec_setup.h"

namespace specchat::ui {

namespace {

QString describe(const PairOptions& o) {
  const QString target = o.target_path.empty() ? QStringLiteral("bundled target")
                                               : QFileInfo(QString::fromStdString(o.target_path)).fileName();
  if (o.draft_path.empty()) return target;
  return target + QStringLiteral(" + draft ") + QFileInfo(QString::fromStdString(o.draft_path)).fileName();
}

// The message of the exception being handled; call only inside a catch block.
QString current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  } catch (...) {
    return QStringLiteral("unknown error");
  }
}

}  // namespace

EngineWorker::EngineWorker(QObject* parent) : QObject(parent) { register_engine_types(); }

EngineWorker::~EngineWorker() { unload(); }

void EngineWorker::stop(quint64 job_id) {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  cancelled_job_ = job_id;
  if (running_job_ == job_id) cancel_.store(true);
}

void EngineWorker::shutdown() {
  std::lock_guard<std::mutex> lock(cancel_mu_);  // ordered with beginJob()
  shutdown_.store(true);
  cancel_.store(true);
}

bool EngineWorker::beginJob(quint64 job_id) {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  running_job_ = job_id;
  cancel_.store(shutdown_.load() || cancelled_job_ == job_id);
  return !cancel_.load();
}

void EngineWorker::endJob() {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  running_job_ = 0;
}

void EngineWorker::unload() {
  stopServer();  // it runs on the pair: goes first
  loaded_.store(false);
  pipo_.reset();       // bound to this target: loaded again (setPipo's choice) with the next pair
  generator_.reset();  // references the models: goes first
  pair_.reset();
}

void EngineWorker::loadModels(const QString& target, const QString& draft) {
  if (shutdown_.load()) return;
  options_ = PairOptions{};
  options_.target_path = target.toStdString();
  options_.draft_path = draft.toStdString();
  options_.backend = static_cast<BackendKind>(target_backend_.load());
  options_.draft_backend = static_cast<BackendKind>(draft_backend_.load());
  {
    std::lock_guard<std::mutex> lock(remote_mu_);
    options_.chat_template = chat_template_;
    options_.kv_type = kv_f32_ ? DType::f32 : DType::f16;
    options_.activations = activations_f32_ ? cpu::Activations::f32 : cpu::Activations::q8;
  }
  unload();
  if (pipo_choice_.enabled) {  // the unit is bound to the target: it loads again after the pair
    PipoStatus st;
    st.enabled = true;
    st.folder = pipo_release_folder(pipo_choice_);
    Q_EMIT pipoStatusChanged(st);
  }
  QString error;
  ensureLoaded(&error);
}

bool EngineWorker::ensureLoaded(QString* error) {
  if (pair_) return true;
  Q_EMIT modelsLoading(QStringLiteral("Loading %1\u2026").arg(describe(options_)));
  try {
    options_.n_seq = sequencesWanted();
    auto pair = std::make_unique<ModelPair>(ModelPair::load(options_));
    // The chat keeps sequence 0 and takes turns with the app server, if one starts.
    const EngineShare chat{0, 1, &turns_};
    generator_ = std::make_unique<Generator>(*pair->target, pair->draft.get(), &chat);
    // The block drafter and MTP head are optional: offered when a file beside the target binds
    // to it; one that does not is a warning, never a failed load.
    features_ = FeatureDrafters{};
    for (const bool block : {true, false}) {
      FeatureDrafterRequest req;
      req.block = block;
      req.mtp = !block;
      req.optional = true;
      try {
        const FeatureDrafters got = install_feature_drafters(generator_->engine(), req);
        if (block) features_.block_size = got.block_size, features_.block_path = got.block_path;
        else features_.mtp = got.mtp, features_.mtp_path = got.mtp_path;
      } catch (const std::exception& e) {
        pair->warnings.push_back(std::string(block ? "block drafter" : "MTP head") + " not used: " + e.what());
      }
    }
    pair_ = std::move(pair);
  } catch (...) {
    generator_.reset();
    *error = current_exception_message();
    Q_EMIT errorOccurred(*error);
    if (server_settings_.enabled) {  // the app's server serves these models: say why it is not up
      ServerState st;
      st.error = QStringLiteral("the models did not load: %1").arg(*error);
      Q_EMIT serverStateChanged(st);
    }
    return false;
  }
  loaded_.store(true);
  ModelInfo info;
  info.target_path = QString::fromStdString(pair_->target->path());
  if (pair_->draft) info.draft_path = QString::fromStdString(pair_->draft->path());
  info.template_name = QString::fromStdString(pair_->template_name);
  info.n_vocab = pair_->target->config().n_vocab;
  info.n_ctx = pair_->target->n_ctx();
  {
    const MemoryInfo mem = pair_->target->memory();
    info.kv_type = mem.kv_type == DType::f32 ? QStringLiteral("f32") : QStringLiteral("f16");
    info.q8_activations = mem.q8_activations;
  }
  for (const auto& w : pair_->warnings) info.warnings << QString::fromStdString(w);
  Q_EMIT modelsLoaded(info);
  startServer();
  if (pipo_choice_.enabled) {
    // PIPO's unit is bound to this target; a refusal is shown (and every PIPO request fails
    // with it), the pair itself stays loaded.
    try {
      loadPipo(pipo_choice_);
    } catch (...) {
      Q_EMIT errorOccurred(current_exception_message());
    }
  }
  return true;
}

void EngineWorker::generate(const GenerateJob& job) {
  GenerationSummary out;
  out.job_id = job.id;
  out.conversation_id = job.conversation_id;
  out.finish = QString::fromUtf8(finish_reason_name(FinishReason::cancelled));
  if (!beginJob(job.id)) {
    endJob();
    Q_EMIT generationFinished(out);
    return;
  }
  if (const RemoteEngine r = remote(); r.isRemote()) {
    try {
      generateRemote(job, r, out);
    } catch (...) {
      out.finish = QStringLiteral("error");
      out.error = current_exception_message();
      Q_EMIT errorOccurred(out.error);
    }
    endJob();
    Q_EMIT generationFinished(out);
    return;
  }
  QString error;
  if (!ensureLoaded(&error)) {
    endJob();
    out.finish = QStringLiteral("error");
    out.error = QStringLiteral("No model loaded: %1").arg(error);
    Q_EMIT generationFinished(out);
    return;
  }
  try {
    if (job.settings.pipo.enabled) {
      generatePipo(job, out);  // approximate; never falls back to plain decoding
      endJob();
      Q_EMIT generationFinished(out);
      return;
    }
    // RequestPlanner's one context policy (the CLI's chat uses it too).
    const ContextFit fit = RequestPlanner(*pair_).fit_context(job_context(job), job.settings.max_tokens);
    if (!fit.fits) throw GenerationError("prompt_too_long", fit.problem);
    out.n_dropped_messages = fit.n_dropped;
    GenerateRequest req;
    req.prompt = fit.prompt;
    req.max_tokens = job.settings.max_tokens;
    req.sampling = job.settings.sampling;
    const SpecSetup setup = plan_spec(job.settings, *pair_, features_, req.prompt);
    out.speculative = setup.speculative;
    req.spec = setup.spec;
    const quint64 id = job.id;
    auto on_token = [this, id](const TokenEvent& ev) {
      Q_EMIT tokenGenerated(id, QString::fromStdString(ev.text), ev.drafted, ev.step);
    };
    GenerationResult r = runTracked(id, req, setup, on_token);
    out.text = QString::fromStdString(r.text);
    out.tokens = std::move(r.tokens);
    out.drafted = std::move(r.drafted);
    out.finish = QString::fromUtf8(finish_reason_name(r.finish));
    out.stats = r.stats;
    out.tokenizer_hash = pair_->target->vocab().hash();
    out.template_name = QString::fromStdString(pair_->template_name);
  } catch (...) {
    out.finish = QStringLiteral("error");
    out.error = current_exception_message();
    Q_EMIT errorOccurred(out.error);
  }
  endJob();
  Q_EMIT generationFinished(out);
}

EngineHost::EngineHost() : worker_(new EngineWorker) {
  thread_.setObjectName(QStringLiteral("specchat-engine"));
  worker_->moveToThread(&thread_);
  // Qt's documented hand-off: the worker (and the models it owns) are deleted on the engine
  // thread as it finishes.
  QObject::connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.start();
}

EngineHost::~EngineHost() {
  worker_->shutdown();
  thread_.quit();
  thread_.wait();
}

void EngineHost::loadModels(const QString& target, const QString& draft) {
  QMetaObject::invokeMethod(
      worker_, [w = worker_, target, draft] { w->loadModels(target, draft); }, Qt::QueuedConnection);
}

}  // namespace specchat::ui

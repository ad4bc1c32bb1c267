#include "ui/engine_worker.h"

#include <QFileInfo>
#include <QMetaObject>

#include <algorithm>
#include <exception>

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

// Encodes `messages` for `pair`, leaving out the oldest turns (never a system message, never
// the last message) until the prompt leaves room for min(max_tokens, n_ctx / 2) new tokens.
// When `context` (the same messages with stored reply ids) is given and the whole conversation
// fits, the prompt reuses those ids exactly (engine/chat_context.h), so the previous turn's KV
// prefix is kept; dropping turns re-encodes from text. Returns the prompt; `*n_dropped` counts
// the messages left out. When even the last turn alone does not fit, the generator's
// prompt_too_long error reports it.
std::vector<int32_t> encode_fitting(const ModelPair& pair, std::vector<ChatMessage> messages,
                                    const std::vector<ContextMessage>& context, int max_tokens,
                                    int* n_dropped) {
  const int n_ctx = pair.target->n_ctx();
  const int reserve = std::max(1, std::min(max_tokens, n_ctx / 2));
  *n_dropped = 0;
  if (!context.empty() && context.size() == messages.size()) {
    ChatContext c = build_chat_context(pair, context);
    if (static_cast<int>(c.prompt.size()) + reserve <= n_ctx) return std::move(c.prompt);
  }
  std::vector<int32_t> prompt = pair.encode_chat(messages);
  while (static_cast<int>(prompt.size()) + reserve > n_ctx) {
    auto first = std::find_if(messages.begin(), messages.end(),
                              [](const ChatMessage& m) { return m.role != "system"; });
    if (first == messages.end() || first + 1 == messages.end()) break;
    // Drop whole exchanges: a user turn together with the reply that follows it.
    do {
      first = messages.erase(first);
      ++*n_dropped;
    } while (first + 1 < messages.end() && first->role == "assistant");
    prompt = pair.encode_chat(messages);
  }
  return prompt;
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
  loaded_.store(false);
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
  unload();
  QString error;
  ensureLoaded(&error);
}

bool EngineWorker::ensureLoaded(QString* error) {
  if (pair_) return true;
  Q_EMIT modelsLoading(QStringLiteral("Loading %1\u2026").arg(describe(options_)));
  try {
    auto pair = std::make_unique<ModelPair>(ModelPair::load(options_));
    generator_ = std::make_unique<Generator>(*pair->target, pair->draft.get());
    pair_ = std::move(pair);
  } catch (...) {
    generator_.reset();
    *error = current_exception_message();
    Q_EMIT errorOccurred(*error);
    return false;
  }
  loaded_.store(true);
  ModelInfo info;
  info.target_path = QString::fromStdString(pair_->target->path());
  if (pair_->draft) info.draft_path = QString::fromStdString(pair_->draft->path());
  info.template_name = QString::fromStdString(pair_->template_name);
  info.n_vocab = pair_->target->config().n_vocab;
  info.n_ctx = pair_->target->n_ctx();
  for (const auto& w : pair_->warnings) info.warnings << QString::fromStdString(w);
  Q_EMIT modelsLoaded(info);
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
  QString error;
  if (!ensureLoaded(&error)) {
    endJob();
    out.finish = QStringLiteral("error");
    out.error = QStringLiteral("No model loaded: %1").arg(error);
    Q_EMIT generationFinished(out);
    return;
  }
  try {
    GenerateRequest req;
    req.prompt = encode_fitting(*pair_, job.messages, job.context, job.settings.max_tokens,
                                &out.n_dropped_messages);
    req.max_tokens = job.settings.max_tokens;
    req.sampling = job.settings.sampling;
    const SpecSetup setup = plan_spec(job.settings, *pair_);
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

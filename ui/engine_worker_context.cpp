// EngineWorker::measureContext: the context meter's token counts (engine_worker.h).
#include "engine/chat_context.h"
#include "engine/runtime/request_planner.h"
#include "ui/engine_worker.h"

namespace specchat::ui {

void EngineWorker::measureContext(const ContextRequest& request) {
  ContextUsage out;
  out.id = request.id;
  if (!pair_ || request.messages.empty()) {
    Q_EMIT contextMeasured(out);
    return;
  }
  try {
    const ModelPair& pair = *pair_;
    auto tokens = [&pair](std::vector<ContextMessage> m) {
      return static_cast<int>(build_chat_context(pair, m).prompt.size());
    };
    const std::vector<ContextMessage>& all = request.messages;
    const ContextMessage empty_turn{ChatMessage{"user", ""}, {}, 0, {}};
    // Prefixes ending in an empty user turn: the same template framing as the real prompt.
    std::vector<ContextMessage> before_message(all.begin(), all.end() - 1);
    before_message.push_back(empty_turn);
    std::vector<ContextMessage> system_only;
    if (request.has_system) system_only.push_back(all.front());
    system_only.push_back(empty_turn);
    const int total = tokens(all);
    const int without_message = tokens(before_message);
    const int system = tokens(system_only);
    out.system_tokens = system;
    out.history_tokens = without_message - system;
    out.message_tokens = total - without_message;
    const ContextFit fit = RequestPlanner(pair).fit_context(all, request.max_tokens);
    out.n_dropped = fit.n_dropped;
    out.reserve = fit.reserve;
    out.n_ctx = pair.target->n_ctx();
    out.ok = true;
  } catch (...) {
    out = ContextUsage{};
    out.id = request.id;
  }
  Q_EMIT contextMeasured(out);
}

}  // namespace specchat::ui

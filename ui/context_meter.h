// The context meter (issue 12, feature 4): under the input box, the tokens the next prompt
// would take (system prompt, history, the message being typed) against the model's context,
// updated as the user types (debounced, counted on the engine thread with the target's
// tokenizer: EngineWorker::measureContext). When the oldest messages will not fit, it says how
// many and the chat view marks them ("left out of the context").
// Object names: contextMeter, contextMeterBar, contextMeterLabel.
#pragma once

#include <QTimer>
#include <QWidget>

#include "ui/engine_types.h"

class QLabel;
class QProgressBar;

namespace specchat::ui {

class ChatController;
class ChatView;
class EngineWorker;
class PromptEdit;

class ContextMeter : public QWidget {
  Q_OBJECT

 public:
  // Debounce between a keystroke and the count, in ms.
  static constexpr int kDebounceMs = 250;

  // All pointers must outlive the meter; `worker` lives on the engine thread.
  ContextMeter(ChatController* controller, EngineWorker* worker, PromptEdit* input, ChatView* view,
               QWidget* parent = nullptr);

  // The last answer shown (ok false before the models are loaded).
  const ContextUsage& usage() const { return usage_; }

 public Q_SLOTS:
  // Asks for a count now (the debounce timer calls it).
  void refresh();
  // Restarts the debounce timer.
  void schedule();

 private:
  void onMeasured(const specchat::ui::ContextUsage& u);

  ChatController* controller_;
  EngineWorker* worker_;
  PromptEdit* input_;
  ChatView* view_;
  QProgressBar* bar_;
  QLabel* label_;
  QTimer timer_;
  quint64 last_id_ = 0;
  ContextUsage usage_;
};

}  // namespace specchat::ui

// Plugs the speculative-decoding tools into a MainWindow: the live panel (right-hand slot,
// fed by EngineWorker::statsUpdated), the "Highlight draft tokens" toggle of the chat view and
// "Compare…" (Ctrl+K, a separate window running EngineWorker::compare), "Benchmark…" (the suite
// sweep with its plots and saved runs, ui/benchmark_view.h), and the context meter. One call from
// gui_main, so the window itself needs no knowledge of them.
#pragma once

class QAction;

namespace specchat::ui {

class BenchmarkView;
class ChatController;
class CompareView;
class ContextMeter;
class EngineWorker;
class LivePanel;
class MainWindow;

struct AnalysisTools {
  LivePanel* live_panel = nullptr;      // owned by the window
  CompareView* compare = nullptr;       // a top-level window owned by `window`, hidden at first
  QAction* compare_action = nullptr;    // View > Compare… (Ctrl+K), object name compareAction
  QAction* show_drafts_action = nullptr;  // View > Highlight draft tokens (the ChatView's)
  QAction* show_live_action = nullptr;    // View > Live panel, object name showLivePanelAction
  ContextMeter* context_meter = nullptr;  // under the input box (ui/context_meter.h)
  BenchmarkView* benchmark = nullptr;     // View > Benchmark…: a top-level window owned by `window`
  QAction* benchmark_action = nullptr;    // object name benchmarkAction (Ctrl+Shift+B)
};

// `worker` and `controller` must outlive `window`. Compare takes the controller's generation
// settings, system prompt and open conversation each time it is opened, and the prompt box's
// text when the compare prompt is empty. Connect AnalysisTools::compare's saveRequested to
// the storage side to make Save persist the run.
AnalysisTools install_analysis_tools(MainWindow& window, EngineWorker* worker, ChatController* controller);

}  // namespace specchat::ui

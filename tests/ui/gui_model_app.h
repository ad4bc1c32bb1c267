// The app on the bundled models for GUI tests: engine thread, controller over a database file,
// the main window shown, the bundled target and draft loading, and the given settings.
#pragma once

#include <QString>

#include "test_paths.h"
#include "tests/ui/gui_test_util.h"
#include "ui/chat_controller.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"

namespace specchat::test {

struct ModelApp {
  static constexpr int kReplyTimeoutMs = 60000;
  ModelApp(const QString& db, const ui::GenerationSettings& s) : controller(engine.worker(), db), window(&controller) {
    controller.setSettings(s);
    window.show();
    engine.loadModels(QString::fromStdString(target_model()), QString::fromStdString(draft_model()));
  }
  // Waits (at most kReplyTimeoutMs) until no reply is being generated.
  bool waitIdle() { return wait_until([&] { return !controller.isBusy(); }, kReplyTimeoutMs); }
  ui::EngineHost engine;
  ui::ChatController controller;
  ui::MainWindow window;
};

}  // namespace specchat::test

// Entry point of test_gui: Catch2 v2 with a QApplication on the offscreen platform (STYLE.md
// §5, tag [gui]), so the GUI tests run without a display. QT_QPA_PLATFORM, when set, wins.
// Each process gets its own timing cache (test_cache_dir.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <QApplication>
#include <QtGlobal>

#include "test_cache_dir.h"

int main(int argc, char** argv) {
  specchat::test::use_private_cache_dir();
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  return Catch::Session().run(argc, argv);
}

// Helpers shared by the GUI tests.
#pragma once

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QTest>

namespace specchat::test {

// Runs the event loop until `pred()` holds or `timeout_ms` passes; returns pred()'s last value.
template <class Pred>
bool wait_until(Pred pred, int timeout_ms) {
  QDeadlineTimer deadline(timeout_ms);
  while (!pred()) {
    if (deadline.hasExpired()) return pred();
    QTest::qWait(5);
  }
  return true;
}

}  // namespace specchat::test

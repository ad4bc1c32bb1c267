#include "ui/engine_types.h"

namespace specchat::ui {

MessageStats to_message_stats(const GenerationStats& s, bool speculative) {
  MessageStats m;
  m.mode = speculative ? "speculative" : "baseline";
  m.n_tokens = s.n_generated;
  m.tokens_per_s = s.tokens_per_s();
  m.ttft_ms = s.ttft_ms;
  m.acceptance_rate = s.acceptance_rate();
  m.mean_accepted_length = s.mean_accepted_length();
  m.n_drafted = s.n_drafted;
  m.n_accepted = s.n_accepted;
  return m;
}

QString format_stats(const MessageStats& s) {
  const QString sep = QStringLiteral(" \u00b7 ");
  QStringList parts;
  parts << QStringLiteral("%1 tok/s").arg(s.tokens_per_s, 0, 'f', 1);
  if (s.mode == "baseline") {
    parts << QStringLiteral("baseline");
  } else {
    parts << QStringLiteral("\u03b1 %1").arg(s.acceptance_rate, 0, 'f', 2)
          << QStringLiteral("\u03c4 %1").arg(s.mean_accepted_length, 0, 'f', 2);
  }
  parts << QStringLiteral("%1 tokens").arg(s.n_tokens);
  return parts.join(sep);
}

void register_engine_types() {
  qRegisterMetaType<GenerateJob>();
  qRegisterMetaType<GenerationSummary>();
  qRegisterMetaType<ModelInfo>();
  qRegisterMetaType<LiveStats>();
  qRegisterMetaType<MessageStats>();
}

}  // namespace specchat::ui

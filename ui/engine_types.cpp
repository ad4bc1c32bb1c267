#include "ui/engine_types.h"

#include <QRandomGenerator>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "engine/runtime/request_planner.h"

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

std::vector<ContextMessage> job_context(const GenerateJob& job) {
  if (!job.context.empty() && job.context.size() == job.messages.size()) return job.context;
  std::vector<ContextMessage> out;
  out.reserve(job.messages.size());
  for (const ChatMessage& m : job.messages) out.push_back({m, {}, 0, {}});
  return out;
}

MessageStats to_message_stats(const GenerationSummary& s) {
  if (s.pipo) return pipo_message_stats(s.pipo_live, static_cast<int>(s.tokens.size()));
  return to_message_stats(s.stats, s.speculative);
}

QString format_stats(const MessageStats& s) {
  const QString sep = QStringLiteral(" \u00b7 ");
  QStringList parts;
  if (s.mode == kPipoMode) {  // the label first: a PIPO reply is never mistaken for a lossless one
    parts << QString::fromUtf8(kPipoLabel) << QStringLiteral("PIPO")
          << QStringLiteral("%1 tok/s").arg(s.tokens_per_s, 0, 'f', 1)
          << QStringLiteral("token 2 kept %1").arg(s.acceptance_rate, 0, 'f', 2)
          << QStringLiteral("%1 tokens/step").arg(s.mean_accepted_length, 0, 'f', 2)
          << QStringLiteral("%1 tokens").arg(s.n_tokens);
    return parts.join(sep);
  }
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

SpecSettings to_spec_settings(const GenerationSettings& g) {
  SpecSettings s;
  s.drafter = g.draft_k <= 0                      ? DrafterChoice::none
              : g.drafter == DrafterKind::ngram ? DrafterChoice::ngram
              : g.drafter == DrafterKind::block ? DrafterChoice::block
              : g.drafter == DrafterKind::mtp   ? DrafterChoice::mtp
                                                : DrafterChoice::model;
  s.tree = g.tree_mode;
  s.auto_tree = g.auto_tree;
  s.draft_k = g.draft_k;
  s.node_budget = g.node_budget;
  s.depth = g.tree_depth;
  s.branch = g.tree_branch;
  return s;
}

void finish_compare(CompareResult& r) {
  const CompareRun base{r.baseline.tokens, r.baseline.stats, r.baseline.total_ms};
  const CompareRun spec{r.speculative.tokens, r.speculative.stats, r.speculative.total_ms};
  const CompareOutcome c = RequestPlanner::compare(base, spec);
  r.identical = c.identical;
  r.first_diff = static_cast<int>(c.first_diff);
  r.speedup_decode = c.speedup_decode;
  r.total_time_ratio = c.total_time_ratio;
}

QString compare_verdict(const CompareResult& r) {
  if (!r.error.isEmpty()) return QStringLiteral("error: %1").arg(r.error);
  if (r.pipo) {  // approximate: a difference is what the mode may do, not a bug
    if (!r.greedy) return QStringLiteral("sampled: outputs may differ (PIPO is %1)").arg(QString::fromUtf8(kPipoLabel));
    if (r.identical) return QStringLiteral("identical tokens (PIPO is %1)").arg(QString::fromUtf8(kPipoLabel));
    return QStringLiteral("diverges from the baseline at token %1 (PIPO is %2)")
        .arg(r.first_diff)
        .arg(QString::fromUtf8(kPipoLabel));
  }
  if (!r.greedy) return QStringLiteral("sampled: outputs may differ, both follow the target distribution");
  if (r.identical) return QStringLiteral("identical tokens");
  return QStringLiteral("first difference at token %1").arg(r.first_diff);
}

namespace {

nlohmann::json side_json(const CompareSide& s) {
  return nlohmann::json{{"text", s.text.toStdString()},
                        {"tokens", s.tokens},
                        {"drafted", s.drafted},
                        {"finish", s.finish.toStdString()},
                        {"total_ms", s.total_ms},
                        {"ttft_ms", s.stats.ttft_ms},
                        {"tokens_per_s", s.stats.tokens_per_s()},
                        {"n_generated", s.stats.n_generated},
                        {"n_drafted", s.stats.n_drafted},
                        {"n_accepted", s.stats.n_accepted},
                        {"n_steps", s.stats.n_steps},
                        {"acceptance_rate", s.stats.acceptance_rate()},
                        {"mean_accepted_length", s.stats.mean_accepted_length()},
                        {"accepted_hist", s.stats.accepted_hist}};
}

}  // namespace

GenerationSettings request_settings(const GenerationSettings& g) {
  GenerationSettings out = g;
  if (!g.pin_seed && g.sampling.temperature > 0) out.sampling.seed = QRandomGenerator::system()->generate64();
  return out;
}

namespace {

nlohmann::json pipo_json(const PipoLive& p) {
  return nlohmann::json{{"release", p.release.toStdString()},
                        {"approximate", true},
                        {"label", kPipoLabel},
                        {"steps", p.steps},
                        {"head_runs", p.head_runs},
                        {"token2_accepted", p.accepted},
                        {"token2_acceptance_rate", p.acceptance_rate()},
                        {"raw_tokens", p.raw_tokens},
                        {"tokens_per_step", p.tokens_per_step()},
                        {"latent_length", p.latent_length},
                        {"raw_length", p.raw_length},
                        {"prompt_pairs", p.prompt_pairs},
                        {"reused_pairs", p.reused_pairs},
                        {"from_latents", p.from_latents},
                        {"ttft_ms", p.ttft_ms},
                        {"tpot_ms", p.tpot_ms},
                        {"threshold", p.threshold},
                        {"raw_context", p.raw_context},
                        {"latent_context", p.latent_context}};
}

}  // namespace

GenerationRecord to_generation_record(const GenerationSummary& s, const GenerationSettings& g) {
  GenerationRecord rec;
  if (s.pipo) {
    // PIPO: its own parameters and counters (docs/design/pipo.md, "Monitoring").
    const PipoLive& p = s.pipo_live;
    rec.mode = kPipoMode;
    rec.params_json = nlohmann::json{{"temperature", g.sampling.temperature},
                                     {"top_k", g.sampling.top_k},
                                     {"top_p", g.sampling.top_p},
                                     {"seed", g.sampling.seed},
                                     {"max_tokens", g.max_tokens},
                                     {"pair_size", 2},
                                     {"extra_draft_tokens", 1},
                                     {"acceptance_threshold", p.threshold},
                                     {"raw_context", p.raw_context},
                                     {"latent_context", p.latent_context},
                                     {"release", p.release.toStdString()},
                                     {"template", s.template_name.toStdString()}}
                          .dump();
    nlohmann::json st = pipo_json(p);
    st["finish"] = s.finish.toStdString();
    st["n_prompt"] = s.stats.n_prompt;
    st["n_generated"] = s.stats.n_generated;
    st["n_steps"] = s.stats.n_steps;
    st["n_drafted"] = s.stats.n_drafted;
    st["n_accepted"] = s.stats.n_accepted;
    st["n_target_tokens"] = s.stats.n_target_tokens;
    st["prefill_ms"] = s.stats.prefill_ms;
    st["decode_ms"] = s.stats.decode_ms;
    st["tokens_per_s"] = p.tokens_per_s();
    rec.stats_json = st.dump();
    return rec;
  }
  rec.mode = s.speculative ? "speculative" : "baseline";
  rec.params_json = nlohmann::json{{"temperature", g.sampling.temperature},
                                   {"top_k", g.sampling.top_k},
                                   {"top_p", g.sampling.top_p},
                                   {"seed", g.sampling.seed},
                                   {"max_tokens", g.max_tokens},
                                   {"draft_k", s.speculative ? g.draft_k : 0},
                                   {"drafter", drafter_kind_name(g.drafter)},
                                   {"tree_mode", g.auto_tree ? "auto" : tree_mode_name(g.tree_mode)},
                                   {"node_budget", g.node_budget},
                                   {"depth", g.tree_depth},
                                   {"branch", g.tree_branch},
                                   {"template", s.template_name.toStdString()}}
                        .dump();
  const GenerationStats& t = s.stats;
  rec.stats_json = nlohmann::json{{"finish", s.finish.toStdString()},
                                  {"n_prompt", t.n_prompt},
                                  {"n_prompt_cached", t.n_prompt_cached},
                                  {"n_generated", t.n_generated},
                                  {"n_drafted", t.n_drafted},
                                  {"n_accepted", t.n_accepted},
                                  {"n_steps", t.n_steps},
                                  {"n_target_tokens", t.n_target_tokens},
                                  {"prefill_ms", t.prefill_ms},
                                  {"ttft_ms", t.ttft_ms},
                                  {"decode_ms", t.decode_ms},
                                  {"draft_ms", t.draft_ms},
                                  {"verify_ms", t.verify_ms},
                                  {"sample_ms", t.sample_ms},
                                  {"tokens_per_s", t.tokens_per_s()},
                                  {"acceptance_rate", t.acceptance_rate()},
                                  {"mean_accepted_length", t.mean_accepted_length()}}
                       .dump();
  rec.accepted_hist = t.accepted_hist;
  return rec;
}

LiveStats live_stats_from_record(const GenerationRecord& rec) {
  LiveStats out;
  out.finished = true;
  out.speculative = rec.mode == "speculative";
  const nlohmann::json st = nlohmann::json::parse(rec.stats_json, nullptr, false);
  const nlohmann::json pa = nlohmann::json::parse(rec.params_json, nullptr, false);
  auto num = [](const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : 0.0;
  };
  auto str = [](const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j.at(key).is_string() ? QString::fromStdString(j.at(key).get<std::string>())
                                                                     : QString();
  };
  GenerationStats& g = out.stats;
  g.n_prompt = static_cast<int>(num(st, "n_prompt"));
  g.n_prompt_cached = static_cast<int>(num(st, "n_prompt_cached"));
  g.n_generated = static_cast<int>(num(st, "n_generated"));
  g.n_drafted = static_cast<int>(num(st, "n_drafted"));
  g.n_accepted = static_cast<int>(num(st, "n_accepted"));
  g.n_steps = static_cast<int>(num(st, "n_steps"));
  g.n_target_tokens = static_cast<int>(num(st, "n_target_tokens"));  // 0 in records made before it existed
  g.prefill_ms = num(st, "prefill_ms");
  g.ttft_ms = num(st, "ttft_ms");
  g.decode_ms = num(st, "decode_ms");
  g.draft_ms = num(st, "draft_ms");
  g.verify_ms = num(st, "verify_ms");
  g.sample_ms = num(st, "sample_ms");
  g.accepted_hist = rec.accepted_hist;
  out.elapsed_ms = g.prefill_ms + g.decode_ms;
  if (rec.mode == kPipoMode) {
    out.pipo = true;
    PipoLive& p = out.pipo_live;
    p.release = str(st, "release");
    p.steps = static_cast<long>(num(st, "steps"));
    p.head_runs = static_cast<long>(num(st, "head_runs"));
    p.accepted = static_cast<long>(num(st, "token2_accepted"));
    p.raw_tokens = static_cast<long>(num(st, "raw_tokens"));
    p.latent_length = static_cast<int>(num(st, "latent_length"));
    p.raw_length = static_cast<int>(num(st, "raw_length"));
    p.prompt_pairs = static_cast<int>(num(st, "prompt_pairs"));
    p.reused_pairs = static_cast<int>(num(st, "reused_pairs"));
    p.from_latents = st.is_object() && st.value("from_latents", false);
    p.ttft_ms = num(st, "ttft_ms");
    p.tpot_ms = num(st, "tpot_ms");
    p.threshold = static_cast<float>(num(st, "threshold"));
    p.raw_context = static_cast<int>(num(st, "raw_context"));
    p.latent_context = static_cast<int>(num(st, "latent_context"));
    out.drafter = QStringLiteral("PIPO");
    out.tree_mode = QStringLiteral("none");
    return out;
  }
  if (out.speculative) {
    const QString d = str(pa, "drafter");
    out.drafter = d == QLatin1String("ngram") ? QStringLiteral("n-gram") : QStringLiteral("draft model");
    out.tree_mode = str(pa, "tree_mode");
    out.node_budget = static_cast<int>(num(pa, out.tree_mode == QLatin1String("chain") ? "draft_k" : "node_budget"));
    out.tree_depth = static_cast<int>(num(pa, out.tree_mode == QLatin1String("chain") ? "draft_k" : "depth"));
  } else {
    out.drafter = QStringLiteral("none");
  }
  return out;
}

CompareRecord to_compare_record(const CompareResult& r) {
  CompareRecord rec;
  if (r.conversation_id > 0) rec.conversation_id = r.conversation_id;
  rec.prompt = r.prompt.toStdString();
  const GenerationSettings& g = r.settings;
  rec.params_json = nlohmann::json{{"temperature", g.sampling.temperature},
                                   {"top_k", g.sampling.top_k},
                                   {"top_p", g.sampling.top_p},
                                   {"seed", g.sampling.seed},
                                   {"max_tokens", g.max_tokens},
                                   {"draft_k", g.draft_k},
                                   {"drafter", r.drafter.toStdString()},
                                   {"tree_mode", r.tree_mode.toStdString()},
                                   {"node_budget", r.node_budget},
                                   {"mode", r.pipo ? kPipoMode : "speculative"}}
                        .dump();
  rec.baseline_json = side_json(r.baseline).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  nlohmann::json second = side_json(r.speculative);
  if (r.pipo) {
    second["pipo"] = pipo_json(r.pipo_live);
    second["quality"] = nlohmann::json::parse(r.pipo_quality_json.toStdString(), nullptr, false);
    if (second["quality"].is_discarded()) second["quality"] = nlohmann::json::object();
  }
  rec.speculative_json = second.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  rec.speedup = r.speedup_decode;
  rec.total_time_ratio = r.total_time_ratio;
  rec.identical = r.identical;
  rec.first_diff = r.identical ? -1 : std::max(0, r.first_diff);
  return rec;
}

void register_engine_types() {
  qRegisterMetaType<GenerateJob>();
  qRegisterMetaType<GenerationSummary>();
  qRegisterMetaType<ModelInfo>();
  qRegisterMetaType<LiveStats>();
  qRegisterMetaType<CompareJob>();
  qRegisterMetaType<CompareResult>();
  qRegisterMetaType<PiecesRequest>();
  qRegisterMetaType<DecodedPieces>();
  qRegisterMetaType<MessageStats>();
  qRegisterMetaType<ContextRequest>();
  qRegisterMetaType<ContextUsage>();
  qRegisterMetaType<ServerSettings>();
  qRegisterMetaType<ServerState>();
  qRegisterMetaType<PipoChoice>();
  qRegisterMetaType<PipoStatus>();
  qRegisterMetaType<PipoHistory>();
  qRegisterMetaType<PipoLive>();
  qRegisterMetaType<std::vector<PipoHistoryEntry>>();
}

}  // namespace specchat::ui

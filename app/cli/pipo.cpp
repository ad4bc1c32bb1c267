#include "app/cli/pipo.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "engine/generator.h"
#include "engine/chat_context.h"
#include "engine/model_pair.h"
#include "engine/pipo/pipo_history.h"
#include "engine/pipo/pipo_text.h"
#include "engine/runtime/request_planner.h"
#include "engine/tokenizer.h"

namespace specchat::cli {

namespace {

using nlohmann::json;

constexpr const char* kLabel = "approximate: not verified by the target";

struct PipoRun {
  PipoUnit unit;
  std::unique_ptr<Tokenizer> tok;
  std::string template_name;
  std::vector<int32_t> prompt;  // raw ids
  PipoSettings settings;
  std::unique_ptr<LlamaModel> plain;  // the fidelity gauge's plain target (--pipo-fidelity)
  PipoFidelity fidelity;
};

// `with_target`: the plain target runs too (compare): --model, else the release's target file,
// checked against the release's target sha256.
PipoRun load_pipo(const CommonOptions& o, bool with_target, bool encode = true) {
  PipoRun r;
  const std::string path = pipo_release_path(o.pipo);
  PipoLoadOptions lo;
  // A --model given is the plain target the release must have been made from (checked, never
  // ignored); compare and the fidelity gauge run the release's own target when none is given.
  with_target = with_target || o.pipo_fidelity > 0 || !o.model.empty();
  lo.plain_target = with_target ? o.model : "";
  lo.check_release_target = with_target;
  lo.backbone.n_threads = o.threads;
  lo.backbone.backend = parse_backend(o.backend);
  lo.backbone.kv_type = parse_kv_type(o.kv_type);
  lo.backbone.activations = parse_activations(o.activations);
  // The user-facing context is raw tokens; the backbone's cache holds pairs (a step that drops
  // token 2 spends a whole pair on one token, so the latent limit is min(n_ctx_train, raw)).
  r.unit = load_pipo_release(path, lo);
  const int train_ctx = r.unit.backbone->config().n_ctx_train;
  r.settings.raw_context = o.n_ctx > 0 ? o.n_ctx : train_ctx;
  r.settings.acceptance_threshold = o.pipo_threshold >= 0 ? o.pipo_threshold : r.unit.info.recommended_threshold;
  r.settings.validate();
  if (o.n_ctx > r.settings.raw_limit(train_ctx)) {
    std::fprintf(stderr, "warning: --ctx %d is more than this release holds: capped at %d raw tokens (2 per pair, %d pairs)\n",
                 o.n_ctx, r.settings.raw_limit(train_ctx), train_ctx);
  } else if (o.n_ctx > train_ctx) {
    std::fprintf(stderr,
                 "warning: --ctx %d is past this release's default context of %d tokens: replies past %d tokens of "
                 "conversation were never measured for quality (%s)\n",
                 o.n_ctx, train_ctx, train_ctx, kLabel);
  }
  const int latent = r.settings.latent_context(train_ctx);
  if (latent < r.unit.backbone->n_ctx()) {
    lo.backbone.n_ctx = latent;  // a smaller KV pool when the user asked for a shorter context
    r.unit = load_pipo_release(path, lo);
  }
  r.tok = std::make_unique<Tokenizer>(r.unit.backbone->vocab());
  if (o.pipo_fidelity > 0) {
    LlamaModel::Options po;
    po.n_threads = o.threads;
    po.backend = parse_backend(o.backend);
    po.kv_type = parse_kv_type(o.kv_type);
    po.activations = parse_activations(o.activations);
    po.n_ctx = r.settings.raw_limit(train_ctx);
    r.plain = LlamaModel::load(o.model.empty() ? r.unit.info.target_file : o.model, po);
    r.fidelity.plain = r.plain.get();
    r.fidelity.every = o.pipo_fidelity;
  }
  std::vector<std::string> warnings;
  r.template_name = choose_chat_template(r.unit.backbone->vocab().chat_template, o.chat_template, "chatml", warnings);
  for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (!encode) {
  } else if (o.chat_given) {
    std::vector<ChatMessage> msgs = o.messages;
    if (msgs.empty()) {
      if (!o.system.empty()) msgs.push_back({"system", o.system});
      msgs.push_back({"user", o.chat});
    }
    r.prompt = encode_chat_ids(r.unit.backbone->vocab(), *r.tok, r.template_name, msgs);
  } else {
    r.prompt = encode_prompt_ids(r.unit.backbone->vocab(), *r.tok, o.prompt);
  }
  // The start-up log: which parts loaded (the release is one unit or nothing).
  std::fprintf(stderr,
               "PIPO release '%s' (%s): backbone %s, MTP head %s, compressor + confidence head %s; threshold %.2f, "
               "context %d raw tokens / %d pairs. PIPO is %s.\n",
               r.unit.info.release.c_str(), r.unit.info.manifest_path.c_str(), r.unit.backbone->path().c_str(),
               r.unit.mtp->path().c_str(), r.unit.io->path().c_str(), r.settings.acceptance_threshold, r.settings.raw_limit(train_ctx),
               r.settings.latent_context(train_ctx), kLabel);
  return r;
}

// Runs one reply from `pairs` on session `s`, streaming text to stdout when `stream`, through
// the Emitter plain decoding uses (pipo_text.h): every token's own bytes (the first piece keeps
// its leading space), stop strings cut text and tokens together. `text` gets the reply's text,
// `tokens` (optional) its ids.
PipoReply run_reply(PipoRun& r, PipoSession& s, std::span<const int32_t> pairs, const CommonOptions& o, bool stream,
                    std::string* text, std::vector<int32_t>* tokens = nullptr) {
  PipoGenerateOptions g;
  g.sampling.temperature = o.temp;
  g.sampling.top_k = o.top_k;
  g.sampling.top_p = o.top_p;
  g.sampling.seed = o.seed;
  g.settings = r.settings;
  g.fidelity = r.plain ? &r.fidelity : nullptr;
  const Vocab& v = r.unit.backbone->vocab();
  g.stop_ids.push_back(v.eos_id);
  if (v.eot_id >= 0) g.stop_ids.push_back(v.eot_id);
  GenerateRequest req;
  req.max_tokens = o.n;
  req.stop_strings = o.stop;
  GenerationResult res;
  const TokenCallback on_event = [stream](const TokenEvent& e) {
    if (stream && !e.text.empty()) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    }
  };
  PipoReply rep = pipo_generate_text(s, pairs, g, req, on_event, res);
  if (stream) std::printf("\n");
  *text = res.text;
  if (tokens) *tokens = res.tokens;
  return rep;
}

double tpot_ms(const PipoReply& r) {
  const long rest = r.counters.raw_tokens - r.first_step_tokens;
  return rest > 0 ? 1000.0 * (r.total_s - r.ttft_s) / static_cast<double>(rest) : 0.0;
}

std::string stats_text(const PipoReply& r, int prompt_tokens, const PipoFidelity* f = nullptr) {
  char b[480];
  std::snprintf(b, sizeof b,
                "[pipo: %s] %ld tokens in %ld steps (%.2f tokens/step), token 2 kept %ld/%ld (%.0f%%), "
                "latent %d pairs for %d raw tokens, TTFT %.1f ms, TPOT %.2f ms, stop: %s",
                kLabel, r.counters.raw_tokens, r.counters.steps, r.counters.tokens_per_step(), r.counters.accepted,
                r.counters.head_runs, 100.0 * r.counters.acceptance_rate(),
                r.prompt_pairs + static_cast<int>(r.new_pairs.size() / 2),
                prompt_tokens + static_cast<int>(r.raw.size()), 1000.0 * r.ttft_s, tpot_ms(r),
                r.stop_reason.c_str());
  std::string out = b;
  // The steps' tokens above include what a stop string then cut from the reply.
  const long cut = r.counters.raw_tokens - static_cast<long>(r.raw.size());
  if (cut > 0) out += "; " + std::to_string(cut) + (cut == 1 ? " token" : " tokens") + " cut by a stop string";
  if (f && f->plain) {
    std::snprintf(b, sizeof b, "; fidelity: KL(plain || PIPO) of token 1 %.3f nats mean, %.3f max (%d samples, 1 step in %d)",
                  f->mean_kl(), f->kl_max, f->samples, f->every);
    out += b;
  }
  return out;
}

}  // namespace

std::string pipo_release_path(const std::string& given) {
  return given == "bundled" ? (std::filesystem::path(bundled_models_dir()) / "pipo").string() : given;
}

json pipo_json(const PipoUnit& u, const PipoSettings& st, const PipoReply& r, int prompt_tokens, const PipoFidelity* f) {
  const int train_ctx = u.backbone->config().n_ctx_train;
  const int latent_len = r.prompt_pairs + static_cast<int>(r.new_pairs.size() / 2);
  const long raw_len = prompt_tokens + static_cast<long>(r.raw.size());  // the kept reply (a stop string cuts)
  const MemoryInfo mem = u.backbone->memory();
  const double kv_per_pair = static_cast<double>(mem.kv_bytes) / static_cast<double>(std::max(1, u.backbone->n_ctx()));
  json j;
  j["mode"] = "pipo";
  j["approximate"] = true;
  j["label"] = kLabel;
  j["release"] = u.info.release;
  j["manifest"] = u.info.manifest_path;
  j["target_sha256"] = u.info.target_sha256;
  j["parts_loaded"] = {{"backbone", u.backbone->path()},
                       {"mtp_head", u.mtp->path()},
                       {"compressor", true},
                       {"confidence_head", true}};
  j["settings"] = {{"pair_size", st.pair_size},
                   {"extra_draft_tokens", st.extra_draft_tokens},
                   {"acceptance_threshold", st.acceptance_threshold},
                   {"raw_context", st.raw_limit(train_ctx)},
                   {"latent_context", st.latent_context(train_ctx)}};
  j["steps"] = r.counters.steps;
  j["head_runs"] = r.counters.head_runs;
  j["token2_accepted"] = r.counters.accepted;
  j["token2_acceptance_rate"] = r.counters.acceptance_rate();
  j["tokens_per_step"] = r.counters.tokens_per_step();
  j["latent_length"] = latent_len;
  j["raw_length"] = raw_len;
  j["compression"] = latent_len > 0 ? static_cast<double>(raw_len) / latent_len : 0.0;
  j["kv_bytes_per_raw_token"] = raw_len > 0 ? kv_per_pair * latent_len / static_cast<double>(raw_len) : 0.0;
  j["prompt_pairs"] = r.prompt_pairs;
  j["ttft_ms"] = 1000.0 * r.ttft_s;
  j["tpot_ms"] = tpot_ms(r);
  j["total_ms"] = 1000.0 * r.total_s;
  j["stop_reason"] = r.stop_reason;
  j["quality"] = json::parse(u.info.quality_json, nullptr, false);
  if (f && f->plain) {
    j["fidelity"] = {{"every", f->every}, {"samples", f->samples}, {"mean_kl", f->mean_kl()}, {"max_kl", f->kl_max},
                     {"monitor_ms", 1000.0 * r.monitor_s}};
  }
  return j;
}

int cmd_generate_pipo(const CommonOptions& o) {
  PipoRun r = load_pipo(o, false);
  std::string text;
  PipoSession s(r.unit);
  std::vector<int32_t> tokens;
  const PipoReply rep = run_reply(r, s, pair_align_ids(r.prompt), o, !o.json, &text, &tokens);
  if (o.json) {
    json j;
    j["text"] = text;
    j["tokens"] = tokens;
    j["pairs"] = rep.new_pairs;
    j["prompt_tokens"] = r.prompt.size();
    j["pipo"] = pipo_json(r.unit, r.settings, rep, static_cast<int>(r.prompt.size()), &r.fidelity);
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    // On stdout with the text: a PIPO reply never leaves without its label.
    std::printf("%s\n", stats_text(rep, static_cast<int>(r.prompt.size()), &r.fidelity).c_str());
  }
  return 0;
}

int cmd_compare_pipo(const CommonOptions& o) {
  // The plain target: --model, else the file the release names (checked against its sha256).
  PipoRun r = load_pipo(o, true);
  const std::string target = o.model.empty() ? r.unit.info.target_file : o.model;
  PairOptions po;
  po.target_path = target;
  po.n_ctx = o.n_ctx;
  po.n_threads = o.threads;
  po.kv_type = parse_kv_type(o.kv_type);
  po.activations = parse_activations(o.activations);
  ModelPair base = ModelPair::load(po);
  Generator g(*base.target, nullptr);
  GenerateRequest req;
  req.prompt = r.prompt;
  req.max_tokens = o.n;
  req.sampling.temperature = o.temp;
  req.sampling.top_k = o.top_k;
  req.sampling.top_p = o.top_p;
  req.sampling.seed = o.seed;
  req.spec.draft_k = 0;
  req.stop_strings = o.stop;
  g.warm_up(req);
  const GenerationResult b = g.generate(req);
  std::string text;
  PipoSession s(r.unit);
  (void)run_reply(r, s, pair_align_ids(r.prompt), o, false, &text);  // warm-up: pages and pool, as the baseline's
  r.fidelity = PipoFidelity{r.fidelity.plain, r.fidelity.seq, r.fidelity.every};  // the warm-up's samples do not count
  PipoSession cold(r.unit);  // from an empty cache, like the baseline's run
  std::vector<int32_t> pv;
  const PipoReply p = run_reply(r, cold, pair_align_ids(r.prompt), o, false, &text, &pv);
  size_t first_diff = 0;
  while (first_diff < pv.size() && first_diff < b.tokens.size() && pv[first_diff] == b.tokens[first_diff]) ++first_diff;
  const bool identical = first_diff == pv.size() && first_diff == b.tokens.size();
  // A ratio needs both sides measured (with -n 0 or a first-token stop there is no TPOT): else
  // null in JSON and n/a in text, never 0.00x.
  const double ttft_speedup = p.ttft_s > 0 && b.stats.ttft_ms > 0 ? b.stats.ttft_ms / (1000.0 * p.ttft_s) : -1.0;
  const double tpot_speedup = tpot_ms(p) > 0 && b.stats.tpot_ms() > 0 ? b.stats.tpot_ms() / tpot_ms(p) : -1.0;
  const auto ratio_json = [](double v) { return v >= 0 ? json(v) : json(nullptr); };  // -1: not measured
  const auto ratio_text = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", v);
    return v >= 0 ? std::string(buf) : std::string("n/a");
  };
  if (o.json) {
    json j;
    j["baseline"] = {{"text", b.text}, {"tokens", b.tokens}, {"ttft_ms", b.stats.ttft_ms}, {"tpot_ms", b.stats.tpot_ms()},
                     {"lossless", true}};
    j["pipo"] = pipo_json(r.unit, r.settings, p, static_cast<int>(r.prompt.size()), &r.fidelity);
    j["pipo"]["text"] = text;
    j["pipo"]["tokens"] = pv;
    j["divergence"] = {{"identical", identical},
                       {"first_difference", identical ? json(nullptr) : json(first_diff)},
                       {"common_prefix_tokens", first_diff}};
    j["ttft_speedup"] = ratio_json(ttft_speedup);
    j["tpot_speedup"] = ratio_json(tpot_speedup);
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "=== baseline (plain target, lossless) ===\n" << b.text << "\n\n=== PIPO (" << kLabel << ") ===\n"
              << text << "\n" << stats_text(p, static_cast<int>(r.prompt.size())) << "\n\n";
    std::printf("TTFT %s, TPOT %s (baseline / PIPO); %s\n", ratio_text(ttft_speedup).c_str(),
                ratio_text(tpot_speedup).c_str(),
                identical ? "identical tokens"
                          : ("diverges from the baseline at token " + std::to_string(first_diff)).c_str());
  }
  return 0;
}

int cmd_chat_pipo(const CommonOptions& o) {
  PipoRun r = load_pipo(o, false, false);
  PipoSession s(r.unit);
  const Vocab& v = r.unit.backbone->vocab();
  const ChatEncoding enc{&v, r.tok.get(), r.template_name};
  // The conversation as text and reply ids, and the pair sequence through the last reply: the
  // next turn continues exactly those latents (engine/pipo/pipo_history.h).
  std::vector<ContextMessage> history;
  if (!o.system.empty()) history.push_back({{"system", o.system}, {}, 0, {}});
  const size_t n_fixed = history.size();
  std::vector<int32_t> latents;
  std::fprintf(stderr, "specchat chat — PIPO (%s); type a message, /reset to start over, /exit to quit\n", kLabel);
  std::string line;
  while (true) {
    std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      history.resize(n_fixed);
      latents.clear();
      std::fprintf(stderr, "(conversation reset)\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({{"user", line}, {}, 0, {}});
    // The chat's one context policy (RequestPlanner::fit_context) on the raw tokens the release
    // holds: the oldest exchanges go until the reply has room. Pairs padded by earlier replies
    // can still overflow the latent context: then one more exchange goes, until only the last
    // message is left.
    const ContextEncoder encode = [&](const std::vector<ContextMessage>& m) { return build_chat_context(enc, m); };
    const ContextFit fit = RequestPlanner::fit_context(history, o.n, r.settings.raw_limit(r.unit.backbone->n_ctx()), encode);
    if (!fit.fits) {
      std::fprintf(stderr, "error: %s\n", fit.problem.c_str());
      history.pop_back();
      continue;
    }
    int dropped = fit.n_dropped;
    history.erase(history.begin() + static_cast<long>(n_fixed), history.begin() + static_cast<long>(n_fixed) + fit.n_dropped);
    std::string text;
    std::vector<int32_t> tokens;
    PipoReply rep;
    // The turn's pairs; while they overflow what the release holds (pipo_generate's check), the
    // next oldest exchange goes.
    const int n_ctx = r.unit.backbone->n_ctx();
    const auto overflows = [&](const std::vector<int32_t>& pairs) {
      return static_cast<int>(pairs.size() / 2) >= r.settings.latent_context(n_ctx) ||
             raw_length(pairs) >= r.settings.raw_limit(n_ctx);
    };
    ChatContext cc = build_chat_context(enc, history);
    PipoContinuation plan = plan_pipo_turn(latents.empty() ? nullptr : &latents, r.unit.info.release, false,
                                           r.unit.info.release, cc.prompt);
    while (overflows(plan.pairs) && history.size() > n_fixed + 1) {
      auto first = history.erase(history.begin() + static_cast<long>(n_fixed));
      ++dropped;
      while (history.size() > n_fixed + 1 && first->message.role == "assistant") {
        first = history.erase(first);
        ++dropped;
      }
      cc = build_chat_context(enc, history);
      plan = plan_pipo_turn(latents.empty() ? nullptr : &latents, r.unit.info.release, false, r.unit.info.release,
                            cc.prompt);
    }
    if (dropped > 0) std::fprintf(stderr, "(context full: left out the %d oldest message(s))\n", dropped);
    if (!plan.note.empty()) std::fprintf(stderr, "(%s)\n", plan.note.c_str());
    r.fidelity = PipoFidelity{r.fidelity.plain, r.fidelity.seq, r.fidelity.every};  // this reply's samples only
    bool ran = false;
    try {
      rep = run_reply(r, s, plan.pairs, o, true, &text, &tokens);
      latents = plan.pairs;
      ran = true;
    } catch (const std::length_error& e) {
      std::fprintf(stderr, "error: %s (/reset to start over)\n", e.what());
    }
    if (!ran) {
      history.pop_back();
      continue;
    }
    // On stdout with the reply, as generate does: approximate text never leaves without its label.
    std::printf("%s · %d of %d pairs cached\n", stats_text(rep, static_cast<int>(cc.prompt.size()), &r.fidelity).c_str(),
                rep.reused_pairs, rep.prompt_pairs);
    std::fflush(stdout);
    latents.insert(latents.end(), rep.new_pairs.begin(), rep.new_pairs.end());
    history.push_back({{"assistant", text}, tokens, v.hash(), r.template_name});
  }
  return 0;
}

}  // namespace specchat::cli

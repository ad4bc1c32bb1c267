#include "app/cli/serve.h"

#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "app/cli/pipo.h"
#include "app/serve/http_server.h"
#include "app/serve/log.h"
#include "app/serve/metrics.h"
#include "app/serve/pipo_service.h"
#include "app/serve/scheduler.h"
#include "engine/model_pair.h"
#include "engine/runtime/request_planner.h"
#include "storage/conversation_store.h"

namespace specchat::cli {

using nlohmann::json;
using serve::ServeConfig;

namespace {

struct Flag {
  const char* name;
  std::function<void(const ServeConfig& from, ServeConfig& to)> copy;
};

// Every flag that overrides a config key, with how its value is copied.
const std::vector<Flag>& flags() {
#define SPECCHAT_FLAG(opt, field) {opt, [](const ServeConfig& f, ServeConfig& t) { t.field = f.field; }}
  static const std::vector<Flag> v = {
      SPECCHAT_FLAG("--host", host),
      SPECCHAT_FLAG("--port", port),
      SPECCHAT_FLAG("--model", model),
      SPECCHAT_FLAG("--draft", draft),
      SPECCHAT_FLAG("--manifest", manifest),
      SPECCHAT_FLAG("--model-name", model_name),
      SPECCHAT_FLAG("--ctx", n_ctx),
      SPECCHAT_FLAG("--threads", threads),
      SPECCHAT_FLAG("--kv-type", kv_type),
      SPECCHAT_FLAG("--activations", activations),
      SPECCHAT_FLAG("--no-draft-backoff", spec.backoff),
      SPECCHAT_FLAG("--draft-k", spec.draft_k),
      SPECCHAT_FLAG("--node-budget", spec.node_budget),
      SPECCHAT_FLAG("--depth", spec.depth),
      SPECCHAT_FLAG("--branch", spec.branch),
      SPECCHAT_FLAG("--temp", temperature),
      SPECCHAT_FLAG("--top-p", top_p),
      SPECCHAT_FLAG("--top-k", top_k),
      SPECCHAT_FLAG("--seed", seed),
      SPECCHAT_FLAG("--max-tokens", default_max_tokens),
      SPECCHAT_FLAG("--max-output-tokens", max_output_tokens),
      SPECCHAT_FLAG("--max-input-tokens", max_input_tokens),
      SPECCHAT_FLAG("--max-body-bytes", max_body_bytes),
      SPECCHAT_FLAG("--parallel", parallel),
      SPECCHAT_FLAG("--queue", queue),
      SPECCHAT_FLAG("--timeout", timeout_s),
      SPECCHAT_FLAG("--read-timeout", read_timeout_s),
      SPECCHAT_FLAG("--log-level", log_level),
      SPECCHAT_FLAG("--log-path", log_path),
      SPECCHAT_FLAG("--log-content", log_content),
      SPECCHAT_FLAG("--api-key", api_key),
      SPECCHAT_FLAG("--pipo", pipo),
      SPECCHAT_FLAG("--pipo-threshold", pipo_threshold),
      SPECCHAT_FLAG("--pipo-fidelity", pipo_fidelity),
  };
#undef SPECCHAT_FLAG
  return v;
}

// --drafter and --tree are strings on the command line.
std::string g_drafter, g_tree;

std::string resolve_draft(const ServeConfig& c) {
  if (c.draft == "none" || c.draft == "ngram") return "";
  return c.draft == "bundled" ? bundled_draft_path() : c.draft;
}

// Start-up step 1: the model files exist, are regular and non-empty, and match the manifest's
// SHA-256 when one is given ({"sha256": {"<file name>": "<hex>"}}, names without directories).
void check_model_files(const std::vector<std::string>& paths, const std::string& manifest, serve::Log& log) {
  json sums = json::object();
  if (!manifest.empty()) {
    std::ifstream in(manifest);
    if (!in) throw std::runtime_error("cannot read the manifest " + manifest);
    const json m = json::parse(in, nullptr, false);
    if (m.is_discarded() || !m.is_object() || !m.contains("sha256") || !m["sha256"].is_object()) {
      throw std::runtime_error("the manifest " + manifest + " must be {\"sha256\": {\"<file name>\": \"<hex>\"}}");
    }
    sums = m["sha256"];
  }
  for (const std::string& p : paths) {
    struct stat st{};
    if (stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) throw std::runtime_error("model file not found: " + p);
    if (st.st_size <= 0) throw std::runtime_error("model file is empty: " + p);
    const std::string name = std::filesystem::path(p).filename().string();
    std::string detail = std::to_string(st.st_size) + " bytes";
    if (sums.contains(name)) {
      if (!sums[name].is_string()) throw std::runtime_error("the manifest's sha256 of " + name + " must be a string");
      const std::string got = sha256_file(p);
      if (got != sums[name].get<std::string>()) {
        throw std::runtime_error("model file " + p + " does not match the manifest (sha256 " + got + ")");
      }
      detail += ", sha256 ok";
    } else if (!manifest.empty()) {
      throw std::runtime_error("the manifest " + manifest + " has no sha256 for " + name);
    }
    log.info("start-up: checked " + p + " (" + detail + ")");
  }
}

// Start-up step 2b: the PIPO release unit (APPROXIMATE mode), loaded once and bound to the served
// target (a release made from another target is refused: PipoError, exit 1), then warmed up.
// The log names the release and the parts that loaded, and says the mode is approximate.
std::unique_ptr<serve::PipoService> start_pipo(const ServeConfig& c, const std::string& target_path, ModelPair& pair,
                                               serve::ServeMetrics& metrics, serve::Log& log) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string path = pipo_release_path(c.pipo);
  PipoUnit unit = serve::load_serve_pipo_unit(path, target_path, pair.target->vocab(), pair.target->n_ctx(), c.threads,
                                              pair.target->backend_kind(), parse_kv_type(c.kv_type));
  const std::string backbone = unit.backbone->path(), mtp = unit.mtp->path(), io = serve::pipo_part_file(unit.info, "io");
  std::unique_ptr<LlamaModel> plain;
  if (c.pipo_fidelity > 0) {  // the gauge's own copy: the served one belongs to the batched engine
    LlamaModel::Options po;
    po.n_threads = c.threads;
    po.backend = pair.target->backend_kind();
    po.kv_type = parse_kv_type(c.kv_type);
    po.activations = parse_activations(c.activations);
    po.n_ctx = pair.target->n_ctx();
    plain = LlamaModel::load(target_path, po);
  }
  auto svc = std::make_unique<serve::PipoService>(std::move(unit), c.pipo_threshold, pair.target->n_ctx(), c.queue,
                                                  metrics, std::move(plain), c.pipo_fidelity);
  svc->warm_up(pair.encode_prompt("Hello"));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const PipoReleaseInfo& info = svc->info();
  char thr[64];
  std::snprintf(thr, sizeof thr, "%.2f (the release recommends %.2f)", svc->default_threshold(),
                info.recommended_threshold);
  log.info("start-up: PIPO release '" + info.release + "' (" + info.manifest_path + ") loaded: backbone " + backbone +
           ", MTP head " + mtp + ", compressor + confidence head " + io + "; acceptance_threshold " + thr +
           ", pair_size 2, extra_draft_tokens 1, context " + std::to_string(svc->raw_limit()) + " raw tokens / " +
           std::to_string(svc->latent_context()) + " pairs (" + std::to_string(static_cast<long>(ms)) + " ms)" +
           (c.pipo_fidelity > 0 ? "; fidelity gauge 1 step in " + std::to_string(c.pipo_fidelity) : std::string()));
  log.info(std::string("start-up: PIPO is approximate (") + serve::kPipoLabel +
           "); only requests with \"decode_mode\": \"pipo\" use it");
  return svc;
}

std::string mib(size_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1fMiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return b;
}

// SIGINT/SIGTERM ask the server to stop: the handler only records the signal (async-signal-safe);
// a watcher thread sees it and stops the server. (Blocking the signals and sigwait-ing would not
// do: OpenBLAS starts its threads before main, with the signals unblocked.) SIGPIPE is ignored
// (a client that closes while we write).
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int s) { g_stop_signal = s; }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace

void add_serve_options(CLI::App& cmd, ServeOptions& o) {
  ServeConfig& f = o.flags;
  o.cmd = &cmd;
  cmd.add_option("--config", o.config_path, "JSON config file (keys as the long flags, with _); flags override it");
  cmd.add_option("--host", f.host, "address to listen on (default 127.0.0.1; any other needs an API key)");
  cmd.add_option("--port", f.port, "port (default 8080; 0 = any free port)")->check(CLI::Range(0, 65535));
  cmd.add_option("--model,-m", f.model, "target model GGUF (default: the bundled target)");
  cmd.add_option("--draft,-d", f.draft, "draft model GGUF, 'bundled' (default) or 'none'");
  cmd.add_option("--manifest", f.manifest, "JSON {\"sha256\": {file name: hex}} the model files must match");
  cmd.add_option("--model-name", f.model_name, "model id reported by /v1/models and in responses");
  cmd.add_option("--ctx", f.n_ctx, "context length (0 = the model's)")->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--threads", f.threads, "CPU threads (0 = all cores)")->check(CLI::Range(0, 256));
  cmd.add_option("--kv-type", f.kv_type, "KV cache rows: f16 (default) or f32")->check(CLI::IsMember({"f16", "f32"}));
  cmd.add_option("--activations", f.activations,
                 "quantized matrices on the CPU: q8 (default, integer dot products) or f32 (unrounded activations)")
      ->check(CLI::IsMember({"q8", "f32"}));
  cmd.add_flag("--no-draft-backoff{false}", f.spec.backoff,
               "draft every step (default: drafting pauses while drafts keep failing; config key draft_backoff)");
  cmd.add_option("--drafter", g_drafter, "default drafter: model, ngram or none (a request may also name block or mtp, served when their files lie beside the target)")
      ->check(CLI::IsMember({"model", "ngram", "none"}));
  cmd.add_option("--tree", g_tree, "default draft shape: chain, dynamic or optimal")
      ->check(CLI::IsMember({"chain", "dynamic", "optimal"}));
  cmd.add_option("--draft-k,-k", f.spec.draft_k, "default drafted tokens per step (0 = none)")->check(CLI::Range(0, 64));
  cmd.add_option("--node-budget", f.spec.node_budget, "default tree nodes per step")->check(CLI::Range(1, 127));
  cmd.add_option("--depth", f.spec.depth, "default tree depth")->check(CLI::Range(1, 64));
  cmd.add_option("--branch", f.spec.branch, "default children per node (dynamic trees)")->check(CLI::Range(1, 32));
  cmd.add_option("--temp,-t", f.temperature, "default temperature (0 = greedy)")->check(CLI::Range(0.0, 2.0));
  cmd.add_option("--top-p", f.top_p, "default top-p")->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--top-k", f.top_k, "default top-k (0 = off)")->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--seed,-s", f.seed, "default sampling seed (0 to 2^64 - 1)")->check(uint64_validator());
  cmd.add_option("--max-tokens,-n", f.default_max_tokens, "max_tokens of a request that names none")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--max-output-tokens", f.max_output_tokens, "largest max_tokens accepted (0 = the context)")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--max-input-tokens", f.max_input_tokens, "largest prompt in tokens (0 = the context - 1)")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--max-body-bytes", f.max_body_bytes, "largest request body (413 past it)");
  cmd.add_option("--parallel", f.parallel, "requests decoded at once (one batched target forward per step)")
      ->check(CLI::Range(1, 64));
  cmd.add_option("--queue", f.queue, "requests waiting beyond --parallel; past it 503")->check(CLI::Range(0, 4096));
  cmd.add_option("--timeout", f.timeout_s, "seconds a request may take, queue included")->check(CLI::Range(0.1, 86400.0));
  cmd.add_option("--read-timeout", f.read_timeout_s, "seconds a client may stay silent while sending")
      ->check(CLI::Range(0.1, 3600.0));
  cmd.add_option("--log-level", f.log_level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  cmd.add_option("--log-path", f.log_path, "log file (default stderr)");
  cmd.add_flag("--log-content", f.log_content, "also log prompt and reply text (off by default)");
  cmd.add_option("--api-key", f.api_key, "API key clients must send (Authorization: Bearer); or SPECCHAT_API_KEY");
  cmd.add_option("--pipo", f.pipo,
                 "PIPO release folder (or 'bundled') for requests with \"decode_mode\": \"pipo\": the APPROXIMATE "
                 "dual-end mode, not verified by the target (never a default)");
  cmd.add_option("--pipo-threshold", f.pipo_threshold,
                 "default PIPO acceptance_threshold in [0, 1] (default: the release's recommended)")
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--pipo-fidelity", f.pipo_fidelity,
                 "PIPO fidelity gauge: every N steps, the KL of token 1 against the plain target (loads a second "
                 "copy of the target; 0 = off, the default)")
      ->check(CLI::Range(0, 1000000));
}

int cmd_serve(ServeOptions& o) {
  const auto t_start = std::chrono::steady_clock::now();
  install_stop_handlers();
  ServeConfig c;
  try {
    if (!o.config_path.empty()) serve::apply_config_file(o.config_path, c);
    for (const Flag& f : flags()) {
      if (o.cmd->count(f.name) > 0) f.copy(o.flags, c);
    }
    if (!g_drafter.empty() && (c.draft == "none" || c.draft == "ngram") && g_drafter != c.draft) {
      throw serve::ConfigError("--draft " + c.draft + " chooses " +
                               (c.draft == "none" ? "plain decoding" : "the n-gram drafter") + " but --drafter " +
                               g_drafter + " was given too: give one of them");
    }
    if (!g_drafter.empty()) parse_drafter_choice(g_drafter, &c.spec.drafter);
    if (!g_tree.empty()) parse_tree_mode(g_tree, &c.spec.tree);
    if (c.draft == "none") c.spec.drafter = DrafterChoice::none;
    if (c.draft == "ngram") c.spec.drafter = DrafterChoice::ngram;
    if (c.api_key.empty()) {
      if (const char* k = std::getenv("SPECCHAT_API_KEY")) c.api_key = k;
    }
    serve::validate_config(c);
  } catch (const serve::ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  serve::Log log(c.log_level, c.log_path);

  // 1. the model files
  const std::string target_path = c.model.empty() ? bundled_target_path() : c.model;
  const std::string draft_path = resolve_draft(c);
  std::vector<std::string> files = {target_path};
  if (!draft_path.empty()) files.push_back(draft_path);
  check_model_files(files, c.manifest, log);
  // 2. tokenizer, draft, target (ModelPair::load)
  PairOptions po;
  po.target_path = target_path;
  po.draft_path = draft_path;
  po.n_ctx = c.n_ctx;
  po.n_threads = c.threads;
  po.kv_type = parse_kv_type(c.kv_type);
  po.activations = parse_activations(c.activations);
  po.n_seq = c.parallel;
  ModelPair pair = ModelPair::load(po);
  for (const std::string& w : pair.warnings) log.warn(w);
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
  log.info("start-up: loaded the tokenizer, " + std::string(pair.draft ? "the draft, " : "") + "the target (" +
           std::to_string(static_cast<long>(load_ms)) + " ms)");
  serve::ServeMetrics metrics;
  // 2b. the PIPO unit (optional)
  std::unique_ptr<serve::PipoService> pipo;
  if (!c.pipo.empty()) pipo = start_pipo(c, target_path, pair, metrics, log);
  // 3-4. drafters, verifier and caches (the Engine over the pair's KV pools)
  serve::Scheduler scheduler(pair, c.parallel, c.queue, c.threads, metrics);
  metrics.set_device_memory(pair.target->memory().device_used_bytes);
  // 5. warm-up
  {
    GenerateRequest w;
    w.prompt = pair.encode_prompt("Hello");
    w.max_tokens = 4;
    w.spec = RequestPlanner(pair, c.threads).plan_tree(c.spec, w.prompt).spec;
    const GenerationResult r = scheduler.warm_up(w);
    log.info("start-up: warm-up request generated " + std::to_string(r.stats.n_generated) + " tokens");
  }
  // 6. listen
  serve::ApiServer server(c, pair, scheduler, metrics, log, pipo.get());
  int port = 0;
  try {
    port = server.bind();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  scheduler.start();
  if (pipo) pipo->start();
  server.set_ready(true);
  const MemoryInfo tm = pair.target->memory();
  const MemoryInfo dm = pair.draft ? pair.draft->memory() : MemoryInfo{};
  const double ready_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
  log.info("listening on http://" + c.host + ":" + std::to_string(port) + " target=" + target_path +
           " draft=" + (draft_path.empty() ? "none" : draft_path) + " drafter=" + drafter_choice_name(c.spec.drafter) +
           " tree=" + tree_mode_name(c.spec.tree) + " draft_k=" + std::to_string(c.spec.draft_k) +
           " node_budget=" + std::to_string(c.spec.node_budget) + " n_ctx=" + std::to_string(pair.target->n_ctx()) +
           " parallel=" + std::to_string(c.parallel) + " queue=" + std::to_string(c.queue) +
           " timeout_s=" + std::to_string(static_cast<long>(c.timeout_s)) + " max_body_bytes=" +
           std::to_string(c.max_body_bytes) + " memory: weights=" + mib(tm.weights_bytes + dm.weights_bytes) +
           " kv=" + mib(tm.kv_bytes + dm.kv_bytes) + "(" + dtype_name(tm.kv_type) + ")" +
           " q8_activations=" + (tm.q8_activations || dm.q8_activations ? "on" : "off") +
           " draft_backoff=" + (c.spec.backoff ? "on" : "off") + " rss=" + mib(serve::resident_memory_bytes()) +
           " auth=" + (c.api_key.empty() ? "off" : "on") +
           " pipo=" + (pipo ? pipo->info().release + "(approximate)" : std::string("none")) +
           " load_ms=" + std::to_string(static_cast<long>(load_ms)) +
           " ready_ms=" + std::to_string(static_cast<long>(ready_ms)));

  std::atomic<bool> listening_done{false};
  std::thread watcher([&] {
    while (!listening_done.load()) {
      if (g_stop_signal != 0) {
        log.info(std::string("stopping (") + (g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM") + ")");
        // Requests in flight end with a 503 "shutting down" (streams: an error event, then
        // [DONE]) before the HTTP side stops, which would cut streams off mid-way.
        scheduler.stop();
        if (pipo) pipo->stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        server.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const bool ok = server.listen();
  listening_done = true;
  if (!ok) log.error("listening failed");
  watcher.join();
  scheduler.stop();
  if (pipo) pipo->stop();
  log.info("stopped");
  return ok ? 0 : 1;
}

}  // namespace specchat::cli

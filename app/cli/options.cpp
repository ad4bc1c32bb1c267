#include "app/cli/options.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace specchat::cli {

const CLI::Validator kFinite(
    [](std::string& s) -> std::string {
      try {
        return std::isfinite(std::stod(s)) ? std::string() : "value must be a finite number";
      } catch (const std::exception&) {
        return "value must be a number";
      }
    },
    "FINITE");

// An integer in [0, 2^64 - 1], written in full: CLI11 took "-1" as 2^64 - 1 and an overflowing
// value silently.
const CLI::Validator kUint64Check(
    [](std::string& s) -> std::string {
      uint64_t v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (s.empty() || ec == std::errc::result_out_of_range) return "value must be an integer from 0 to 2^64 - 1";
      return ec != std::errc() || end != s.data() + s.size() ? "value must be an integer from 0 to 2^64 - 1"
                                                             : std::string();
    },
    "UINT64");

const CLI::Validator& uint64_validator() { return kUint64Check; }

const CLI::Validator kNonEmpty([](std::string& s) -> std::string { return s.empty() ? "must not be empty" : ""; },
                               "NONEMPTY");

void add_engine_options(CLI::App& cmd, CommonOptions& o) {
  cmd.add_flag("--no-draft-backoff", o.no_backoff,
               "draft every step, even while drafts keep failing (by default a model, block or MTP drafter pauses "
               "after 4 steps with nothing accepted: 8 plain steps, doubling per failed probe up to 256; lossless)");
  cmd.add_option("--kv-type", o.kv_type,
                 "element type of the KV cache rows: f16 (default, half the memory) or f32 (the rows as computed; "
                 "the CUDA backend always keeps f32)")
      ->check(CLI::IsMember({"f16", "f32"}));
  cmd.add_option("--activations", o.activations,
                 "quantized (Q8_0, Q4_K, ...) matrices on the CPU: q8 (default; activations rounded to 8 bits, integer "
                 "dot products, llama.cpp's accuracy class) or f32 (unrounded: the strict 1e-3 tier, slower)")
      ->check(CLI::IsMember({"q8", "f32"}));
}

void add_common_options(CLI::App& cmd, CommonOptions& o) {
  cmd.add_option("--model,-m", o.model, "target model GGUF (default: the bundled target)");
  cmd.add_option("--draft,-d", o.draft,
                 "draft model GGUF, 'bundled', 'ngram' or 'none' for plain decoding (default: the bundled draft "
                 "for the bundled target; with --model, the smallest compatible .gguf beside it, else n-gram)");
  cmd.add_option("--draft-k,-k", o.draft_k, "drafted tokens per step (0 = no drafting)")
      ->check(CLI::Range(0, 64));
  cmd.add_option("--drafter", o.drafter,
                 "who drafts: model (the draft model), ngram (prompt lookup), block (DFlash block drafter, "
                 "--block-drafter), mtp (MTP head, --mtp) or none")
      ->check(CLI::IsMember({"model", "ngram", "block", "mtp", "none"}));
  cmd.add_option("--block-drafter", o.block_drafter, "DFlash block drafter GGUF for --drafter block");
  cmd.add_option("--mtp", o.mtp, "MTP head GGUF for --drafter mtp");
  cmd.add_option("--pipo", o.pipo,
                 "PIPO release folder (or 'bundled'): the APPROXIMATE dual-end mode, not verified by the target");
  cmd.add_option("--pipo-threshold", o.pipo_threshold,
                 "PIPO acceptance_threshold in [0, 1] for the second token (default: the release's recommended)")
      ->check(kFinite)
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--pipo-fidelity", o.pipo_fidelity,
                 "PIPO fidelity gauge: KL of token 1 against the plain target (--model, else the release's) on one "
                 "step in N (0 = off)")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--tree", o.tree,
                 "draft shape: chain (draft-k tokens), dynamic (EAGLE-2), optimal (Sequoia, from the pair's "
                 "calibration) or auto (N, D and shape chosen from measured timings)")
      ->check(CLI::IsMember({"chain", "dynamic", "optimal", "auto"}));
  cmd.add_option("--node-budget", o.node_budget, "tree nodes sent to the target per step")->check(CLI::Range(1, 127));
  cmd.add_option("--depth", o.depth, "maximum tree depth")->check(CLI::Range(1, 64));
  cmd.add_option("--branch", o.branch, "children expanded per node (dynamic trees)")->check(CLI::Range(1, 32));
  cmd.add_option("--temp,-t", o.temp, "temperature (0 = greedy)")->check(kFinite)->check(CLI::Range(0.0, 100.0));
  cmd.add_option("--top-k", o.top_k, "top-k (0 = off)")->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--top-p", o.top_p, "top-p (1 = off)")->check(kFinite)->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--seed,-s", o.seed, "sampling seed (0 to 2^64 - 1)")->check(kUint64Check);
  cmd.add_option("-n,--max-tokens", o.n, "tokens to generate")->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--ctx", o.n_ctx, "context length (0 = the model's)")->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--threads", o.threads, "CPU threads of the engine's pool (0 = all cores; more than the cores is capped)")->check(CLI::Range(0, 256));
  cmd.add_option("--backend", o.backend, "where the target model runs: cpu or cuda (an NVIDIA GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--draft-backend", o.draft_backend, "where the draft model runs: cpu or cuda (default: --backend)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  add_engine_options(cmd, o);
  auto* p = cmd.add_option("--prompt,-p", o.prompt, "raw prompt text (continued as is)");
  auto* c = cmd.add_option("--chat,-c", o.chat, "user message, wrapped in the model's chat template");
  p->excludes(c);
  auto* m = cmd.add_option("--messages", o.messages_file,
                           "path of a JSON file holding a conversation ([{\"role\": ..., \"content\": ...}, ...]), "
                           "rendered with the chat template; the reply answers its last turn");
  m->type_name("FILE");
  m->excludes(p);
  m->excludes(c);
  cmd.add_option("--system", o.system, "system prompt for --chat");
  std::string names;
  for (const auto& n : chat_template_names()) names += (names.empty() ? "" : ", ") + n;
  cmd.add_option("--chat-template", o.chat_template,
                 "chat template to use instead of the one recognised in the model file (" + names +
                     "); also the pick when the file's template is not recognised (default then: chatml, "
                     "with a warning)")
      ->check(CLI::IsMember(chat_template_names()));
  cmd.add_option("--stop", o.stop, "stop string (repeatable, not empty); not included in the output")
      ->check(kNonEmpty);
  cmd.add_flag("--json", o.json, "print one JSON object at the end instead of streaming text");
}

std::vector<ChatMessage> read_messages_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw std::runtime_error("--messages: " + path + " is a directory, not a JSON conversation file");
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    // It takes a path; the conversation given inline is the likely slip (break-it pass).
    const bool inline_json = path.find_first_not_of(" \t\r\n") != std::string::npos &&
                             (path[path.find_first_not_of(" \t\r\n")] == '[' ||
                              path[path.find_first_not_of(" \t\r\n")] == '{');
    throw std::runtime_error("--messages: cannot read the file " + path +
                             (inline_json ? " (--messages takes the path of a JSON file, not the JSON itself)" : ""));
  }
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error("--messages: " + path + " is not JSON (" + e.what() + ")");
  }
  if (j.is_object() && j.contains("messages")) j = j["messages"];
  if (!j.is_array() || j.empty()) {
    throw std::runtime_error("--messages: " + path + " holds no messages (expected a non-empty array of "
                             "{\"role\", \"content\"} objects)");
  }
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    if (!e.is_object() || !e.contains("role") || !e["role"].is_string() || !e.contains("content") ||
        !e["content"].is_string()) {
      throw std::runtime_error("--messages: message " + std::to_string(i) + " of " + path +
                               " needs a string \"role\" and a string \"content\"");
    }
    ChatMessage msg{e["role"].get<std::string>(), e["content"].get<std::string>()};
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant") {
      throw std::runtime_error("--messages: message " + std::to_string(i) + " of " + path + " has role \"" +
                               msg.role + "\" (expected system, user or assistant)");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

void add_remote_options(CLI::App& cmd, CommonOptions& o, bool compare) {
  if (compare) {
    cmd.add_option("--baseline-endpoint", o.baseline_endpoint,
                   "compare: run the baseline on this OpenAI-compatible server (default: --endpoint)");
  }
  cmd.add_option("--endpoint", o.endpoint,
                 "an OpenAI-compatible server (http://host:port[/v1]) to generate with instead of the local engine");
  cmd.add_option("--api-key", o.api_key, "the endpoint's API key (default: $SPECCHAT_API_KEY)");
  cmd.add_option("--remote-model", o.model_name, "the model name sent to the endpoint");
}

std::string refused_combination(const CLI::App& sub, const CommonOptions& o) {
  const auto given = [&](const char* flag) {
    const CLI::Option* opt = sub.get_option_no_throw(flag);
    return opt != nullptr && opt->count() > 0;
  };
  if (!o.pipo.empty()) {
    for (const char* f : {"--draft", "--draft-k", "--drafter", "--block-drafter", "--mtp", "--tree", "--node-budget",
                          "--depth", "--branch", "--no-draft-backoff", "--draft-backend"}) {
      if (given(f)) {
        return std::string(f) + " does not apply to --pipo (PIPO drafts with its release's own MTP head and pair " +
               "compressor; leave it out)";
      }
    }
  }
  if ((o.draft == "none" || o.draft == "ngram") && given("--drafter") && o.drafter != o.draft) {
    return "--draft " + o.draft + " chooses the " + (o.draft == "none" ? "plain decoding" : "n-gram drafter") +
           " but --drafter " + o.drafter + " was given too: give one of them";
  }
  if (!o.draft.empty() && o.draft != "none" && o.draft != "ngram" && given("--drafter") && o.drafter != "model") {
    return "--draft " + o.draft + " names a draft model, which only --drafter model uses, but --drafter " + o.drafter +
           " was given: leave one of them out";
  }
  if (o.pipo.empty() && (given("--pipo-threshold") || given("--pipo-fidelity"))) {
    return "--pipo-threshold and --pipo-fidelity need --pipo (the approximate PIPO mode)";
  }
  // The drafter that runs: --draft none / ngram name one too (main maps them after this check).
  const std::string drafter = o.draft == "none" || o.draft == "ngram" ? o.draft : o.drafter;
  if (drafter == "none") {
    for (const char* f : {"--draft-k", "--tree", "--node-budget", "--depth", "--branch", "--no-draft-backoff",
                          "--draft-backend", "--block-drafter", "--mtp"}) {
      if (!given(f) || (std::string(f) == "--draft-k" && o.draft_k == 0)) continue;  // -k 0: plain too
      return std::string(f) + " does not apply to plain decoding (--" + (o.drafter == "none" ? "drafter" : "draft") +
             " none drafts nothing): leave it out";
    }
  }
  if (given("--draft-k") && o.draft_k == 0) {  // -k 0 is plain decoding whatever the drafter
    for (const char* f : {"--tree", "--node-budget", "--depth", "--branch", "--no-draft-backoff", "--draft-backend",
                          "--block-drafter", "--mtp"}) {
      if (given(f)) {
        return std::string(f) + " does not apply with --draft-k 0 (plain decoding: nothing is drafted): leave it out, "
               "or draft with --draft-k > 0";
      }
    }
  }
  for (const auto& [flag, kind] : {std::pair<const char*, const char*>{"--block-drafter", "block"}, {"--mtp", "mtp"}}) {
    if (given(flag) && drafter != kind) {
      return std::string(flag) + " is read by --drafter " + kind + " only (the drafter is " + drafter +
             "): add --drafter " + kind + " or leave it out";
    }
  }
  // What shapes a draft: a chain's length, a tree's budget (engine/speculative/drafter.h TreeBudget).
  // With --endpoint and no --tree the server's default shape applies, which this CLI cannot see.
  const bool remote = !o.endpoint.empty() || !o.baseline_endpoint.empty();
  if (remote && !given("--tree")) {
    // nothing to judge the shape options against
  } else if (o.tree == "chain") {
    for (const char* f : {"--node-budget", "--depth", "--branch"}) {
      if (given(f)) return std::string(f) + " does not apply to --tree chain (a chain is --draft-k tokens long)";
    }
  } else if (o.tree == "auto" && (given("--node-budget") || given("--depth") || given("--branch"))) {
    for (const char* f : {"--node-budget", "--depth", "--branch"}) {
      if (given(f)) return std::string(f) + " does not apply to --tree auto (it chooses N, D and the shape from measured timings)";
    }
  } else if (given("--draft-k") && o.draft_k > 0) {  // dynamic, optimal or auto
    return "--draft-k sets a chain's length; --tree " + o.tree +
           (o.tree == "auto" ? " chooses the shape from measured timings" : " is sized by --node-budget and --depth");
  }
  if (o.tree == "optimal" && given("--branch")) {
    return "--branch does not apply to --tree optimal (its shape comes from the calibration)";
  }
  if (drafter == "ngram" && given("--no-draft-backoff")) {
    return "--no-draft-backoff does not apply to --drafter ngram (the n-gram drafter never backs off)";
  }
  if (drafter != "model" && drafter != "none" && given("--draft-backend")) {
    return "--draft-backend places the draft model; --drafter " + drafter + " runs beside the target: leave it out";
  }
  if (!o.endpoint.empty() || !o.baseline_endpoint.empty()) {
    // The server's own models and engine settings run; only what a request can carry is sent.
    for (const char* f : {"--model", "--kv-type", "--activations", "--block-drafter", "--mtp", "--depth", "--branch",
                          "--no-draft-backoff", "--ctx", "--threads", "--backend", "--draft-backend",
                          "--chat-template"}) {
      if (given(f)) {
        return std::string(f) + " does not apply to --endpoint (the server's models and settings run; a request " +
               "carries --drafter, --draft-k, --tree and --node-budget)";
      }
    }
    if (given("--draft") && o.draft != "none" && o.draft != "ngram") {
      return "--draft " + o.draft + " does not apply to --endpoint (the server's draft model runs)";
    }
    if (o.tree == "auto") return "--tree auto does not apply to --endpoint (a request names chain, dynamic or optimal)";
  }
  if (given("--chat-template") && given("--prompt")) {
    return "--chat-template applies to --chat, --messages and chat (a raw --prompt is continued as it is, without a "
           "chat template)";
  }
  if (o.endpoint.empty() && o.baseline_endpoint.empty()) {
    for (const char* f : {"--api-key", "--remote-model"}) {
      if (given(f)) return std::string(f) + " needs --endpoint (it is sent to a remote server)";
    }
  }
  if (given("--system") && given("--prompt")) {
    return "--system applies to --chat (a raw --prompt is continued as it is, without a chat template)";
  }
  if (given("--system") && given("--messages")) {
    return "--system applies to --chat (a --messages file carries its own system message, if any)";
  }
  return {};
}

void apply_backends(const CommonOptions& o, PairOptions& po) {
  po.backend = parse_backend(o.backend);
  po.draft_backend = o.draft_backend.empty() ? po.backend : parse_backend(o.draft_backend);
  po.chat_template = o.chat_template;
  po.kv_type = parse_kv_type(o.kv_type);
  po.activations = parse_activations(o.activations);
}

cpu::Activations parse_activations(const std::string& name) {
  if (name == "q8") return cpu::Activations::q8;
  if (name == "f32") return cpu::Activations::f32;
  throw std::invalid_argument("activations must be q8 or f32, not '" + name + "'");
}

DType parse_kv_type(const std::string& name) {
  if (name == "f16") return DType::f16;
  if (name == "f32") return DType::f32;
  throw std::invalid_argument("kv_type must be f16 or f32, not '" + name + "'");
}

void apply_draft(const CommonOptions& o, bool need_draft, PairOptions& po) {
  if (!need_draft || o.draft == "none" || o.draft == "ngram") return;
  if (o.draft == "bundled" || (o.draft.empty() && o.model.empty())) {
    po.draft_path = bundled_draft_path();
  } else if (o.draft.empty()) {
    po.auto_draft = true;
  } else {
    po.draft_path = o.draft;
  }
}

void use_draft_choice(const ModelPair& pair, CommonOptions& o) {
  const DraftChoice& c = pair.draft_choice;
  if (c.reason == "given" || c.drafter == "none") return;
  if (c.drafter == "model") {
    std::fprintf(stderr, "draft: %s (%s)\n", c.path.c_str(), c.reason.c_str());
  } else {
    std::fprintf(stderr, "draft: n-gram drafter (%s)\n", c.reason.c_str());
    o.drafter = "ngram";
  }
}

SpecSettings spec_settings(const CommonOptions& o) {
  SpecSettings s;
  parse_drafter_choice(o.drafter, &s.drafter);
  s.auto_tree = o.tree == "auto";
  if (!s.auto_tree) parse_tree_mode(o.tree, &s.tree);
  s.draft_k = o.draft_k;
  s.node_budget = o.node_budget;
  s.depth = o.depth;
  s.branch = o.branch;
  s.backoff = !o.no_backoff;
  return s;
}

GenerateRequest make_request(const CommonOptions& o, std::vector<int32_t> prompt, int draft_k) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = o.n;
  r.sampling.temperature = o.temp;
  r.sampling.top_k = o.top_k;
  r.sampling.top_p = o.top_p;
  r.sampling.seed = o.seed;
  SpecSettings s = spec_settings(o);
  s.draft_k = draft_k;
  r.spec = to_spec_config(s);
  r.stop_strings = o.stop;
  return r;
}

}  // namespace specchat::cli
